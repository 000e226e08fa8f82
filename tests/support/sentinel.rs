//! Failover groups for tests: real `redis-server --sentinel` processes watching a real master
//! and its replica, each in its own temporary directory on its own loopback port.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::proxy::DelayProxy;
use super::tls::TlsServe;
use super::{RedisServer, eventually, free_port, redis_server_binary};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// One sentinel process.
pub struct Sentinel {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    /// Serves TLS only, and reaches its masters over TLS.
    tls: Option<TlsServe>,
}

impl Sentinel {
    /// A sentinel watching `service` at `127.0.0.1:master_port`, deciding a failover with
    /// `quorum` votes; a master is down after 500 ms of silence. The failover timeout is 20 s:
    /// a sentinel also waits that long before it points a replica that replicates from
    /// another address (the group's proxy) back at the master, which would undo
    /// [`Group::hold_replication`].
    pub fn start(service: &str, master_port: u16, quorum: u32) -> Sentinel {
        Sentinel::start_with(service, master_port, quorum, "")
    }

    /// The same, with `password` required of its clients (`requirepass`; its own
    /// readiness check then only needs the process to answer).
    pub fn start_with_password(service: &str, master_port: u16, password: &str) -> Sentinel {
        Sentinel::start_with(
            service,
            master_port,
            1,
            &format!("requirepass {password}\n"),
        )
    }

    /// A sentinel that serves TLS only, as `tls` says, and reaches the master (a TLS node) over
    /// TLS (`tls-replication yes`).
    pub fn start_tls(service: &str, master_port: u16, tls: &TlsServe) -> Sentinel {
        Sentinel::start_full(service, master_port, 1, "", Some(tls))
    }

    /// A sentinel that knows the master as `localhost` and announces host names
    /// (`resolve-hostnames yes`, `announce-hostnames yes`): it names the master `localhost`.
    pub fn start_named(service: &str, master_port: u16) -> Sentinel {
        let names = "sentinel resolve-hostnames yes\nsentinel announce-hostnames yes\n";
        Sentinel::start_full(service, master_port, 1, names, None)
    }

    fn start_with(service: &str, master_port: u16, quorum: u32, extra: &str) -> Sentinel {
        Sentinel::start_full(service, master_port, quorum, extra, None)
    }

    /// `extra` lines come before the `sentinel monitor` line, which names the master
    /// `localhost` when they turn `resolve-hostnames` on.
    fn start_full(
        service: &str,
        master_port: u16,
        quorum: u32,
        extra: &str,
        tls: Option<&TlsServe>,
    ) -> Sentinel {
        let bin = redis_server_binary();
        for _ in 0..20 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "redlock-sentinel-{}-{}-{port}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).expect("create temp dir");
            let conf = dir.join("sentinel.conf");
            let host = if extra.contains("resolve-hostnames yes") {
                "localhost"
            } else {
                "127.0.0.1"
            };
            // Later lines win: a TLS sentinel listens on `port` for TLS only.
            let tls_conf = tls.map_or(String::new(), |t| {
                let a = t.args(port);
                let mut lines = String::new();
                for kv in a.chunks(2) {
                    lines += &format!("{} {}\n", kv[0].trim_start_matches("--"), kv[1]);
                }
                lines + "tls-replication yes\n"
            });
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                     {extra}sentinel monitor {service} {host} {master_port} {quorum}\n\
                     sentinel down-after-milliseconds {service} 500\n\
                     sentinel failover-timeout {service} 20000\n\
                     sentinel parallel-syncs {service} 1\n{tls_conf}",
                    dir = dir.display()
                ),
            )
            .expect("write sentinel.conf");
            let child = Command::new(&bin)
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server --sentinel");
            let mut s = Sentinel {
                port,
                child: Some(child),
                dir,
                tls: tls.cloned(),
            };
            if s.answers() {
                return s;
            }
            s.kill();
        }
        panic!("could not start a sentinel on a free port after 20 tries");
    }

    /// Waits (bounded) until our process answers on the port.
    fn answers(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        let pid = self.child.as_ref().map(|c| c.id()).unwrap_or_default();
        while Instant::now() < deadline {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                return false;
            }
            match self.query::<String>(&mut redis::cmd("INFO").arg("server").clone()) {
                Ok(text)
                    if text
                        .lines()
                        .any(|l| l.trim() == format!("process_id:{pid}")) =>
                {
                    return true;
                }
                // A password is required: our process answers (it has not exited).
                Err(e) if e.code() == Some("NOAUTH") => return true,
                _ => {}
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// `127.0.0.1:P`, as a sentinel URL lists it.
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends `cmd` on a new connection.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> redis::RedisResult<T> {
        let client = match &self.tls {
            Some(t) => t.client(&format!("rediss://127.0.0.1:{}", self.port))?,
            None => redis::Client::open(format!("redis://127.0.0.1:{}", self.port))?,
        };
        let mut c = client.get_connection_with_timeout(Duration::from_millis(500))?;
        c.set_read_timeout(Some(Duration::from_secs(2)))?;
        cmd.query(&mut c)
    }

    /// The port of the master this sentinel names for `service`.
    pub fn master_port(&self, service: &str) -> Option<u16> {
        let r: Option<(String, String)> = self
            .query(
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(service),
            )
            .ok()?;
        r.and_then(|(_, p)| p.parse().ok())
    }

    /// A field of `SENTINEL master <service>`.
    fn master_field(&self, service: &str, name: &str) -> Option<String> {
        let flat: Vec<String> = self
            .query(redis::cmd("SENTINEL").arg("master").arg(service))
            .ok()?;
        flat.chunks(2)
            .find(|kv| kv[0] == name)
            .map(|kv| kv[1].clone())
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A failover group: a master, one replica that replicates through a proxy (so that a test
/// can hold replication back: [`hold_replication`](Self::hold_replication)), and three
/// sentinels with a quorum of two.
pub struct Group {
    pub service: String,
    pub master: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<Sentinel>,
    link: DelayProxy,
}

impl Group {
    /// Starts the group and waits (bounded) until every sentinel knows the replica and the
    /// two other sentinels, so that a failover can be decided.
    pub fn start(service: &str) -> Group {
        let master = RedisServer::start();
        let link = DelayProxy::start(master.port, Duration::ZERO);
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &link.port.to_string()]);
        // The replica must report its own port to the master (and so to the sentinels), not
        // the proxy's view of it: it announces the port it listens on.
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|_| Sentinel::start(service, master.port, 2))
            .collect();
        let g = Group {
            service: service.to_string(),
            master,
            replica,
            sentinels,
            link,
        };
        let ready = eventually(Duration::from_secs(30), || {
            g.sentinels.iter().all(|s| {
                s.master_field(&g.service, "num-slaves").as_deref() == Some("1")
                    && s.master_field(&g.service, "num-other-sentinels").as_deref() == Some("2")
            })
        });
        assert!(
            ready,
            "the sentinels did not discover the replica and each other"
        );
        g
    }

    /// `redis+sentinel://127.0.0.1:A,127.0.0.1:B,127.0.0.1:C/<service>`.
    pub fn url(&self) -> String {
        let list: Vec<String> = self.sentinels.iter().map(Sentinel::host_port).collect();
        format!("redis+sentinel://{}/{}", list.join(","), self.service)
    }

    /// Replication stops reaching the replica (its link delays every byte by a minute).
    pub fn hold_replication(&self) {
        self.link.set_delay(Duration::from_secs(60));
    }

    /// Waits (bounded) until every sentinel names the server on `port` as the master.
    pub fn wait_master(&self, port: u16) -> bool {
        eventually(Duration::from_secs(60), || {
            self.sentinels
                .iter()
                .all(|s| s.master_port(&self.service) == Some(port))
        })
    }
}
