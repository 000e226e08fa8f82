//! Local `redis-server` processes for `redlock demo`: each on a free loopback port in a
//! temporary directory of its own, without persistence, and stopped (by PID) when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The redis-server program: `$REDIS_SERVER`, or `redis-server` on the PATH.
pub fn server_program() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

/// Running servers.
pub struct LocalNodes {
    servers: Vec<(Child, u16)>,
    dir: PathBuf,
}

impl LocalNodes {
    /// Starts `n` servers, or says why it could not.
    pub fn start(n: usize) -> Result<LocalNodes, String> {
        let dir = std::env::temp_dir().join(format!("redlock-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut nodes = LocalNodes {
            servers: Vec::new(),
            dir,
        };
        for i in 0..n {
            let server = (0..20)
                .find_map(|_| nodes.spawn(i))
                .ok_or("could not start redis-server on a free loopback port")?;
            nodes.servers.push(server);
        }
        Ok(nodes)
    }

    fn spawn(&self, i: usize) -> Option<(Child, u16)> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .ok()?
            .port();
        let dir = self.dir.join(i.to_string());
        std::fs::create_dir_all(&dir).ok()?;
        let mut child = Command::new(server_program())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // Up to about 10 s for the server to answer.
        for _ in 0..1000 {
            if let Ok(Some(_)) = child.try_wait() {
                return None; // exited: most likely the port was taken meanwhile
            }
            if answers(port) {
                return Some((child, port));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// The servers' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|(_, port)| format!("redis://127.0.0.1:{port}"))
            .collect()
    }
}

/// True when a server on `port` answers `PING`.
fn answers(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

impl Drop for LocalNodes {
    fn drop(&mut self) {
        for (child, _) in &mut self.servers {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
