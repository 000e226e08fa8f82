//! The floor: the least a client can do for one Redlock cycle. It writes the raw
//! `SET key token NX PX ttl` to every node over non-blocking sockets, returns as soon as a
//! quorum has answered, then does the same with the release script. No validity arithmetic,
//! no error classification, no pooling: the physical limit of one round trip per step. Like
//! any correct pipelining client, it counts replies that arrive after their step and discards
//! them later.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

struct FConn {
    sock: TcpStream,
    buf: Vec<u8>,
    owed: usize,
    waiting: bool,
}

impl FConn {
    /// Complete reply lines received (every reply used here is one line).
    fn lines(&mut self) -> Vec<Vec<u8>> {
        let mut tmp = [0u8; 4096];
        loop {
            match self.sock.read(&mut tmp) {
                Ok(0) => break,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(_) => break,
            }
        }
        let mut out = Vec::new();
        while let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
            out.push(self.buf[..pos].to_vec());
            self.buf.drain(..pos + 2);
        }
        out
    }
}

pub struct Floor {
    conns: Vec<FConn>,
    quorum: usize,
    sha: String,
    rng: u64,
}

pub const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
return redis.call('del', KEYS[1]) else return 0 end";

impl Floor {
    /// Connects to `ports` on 127.0.0.1 and loads the release script.
    pub fn connect(ports: &[u16], seed: u64) -> Floor {
        let mut conns = Vec::new();
        let mut sha = String::new();
        for &p in ports {
            let mut sock = TcpStream::connect(("127.0.0.1", p)).expect("floor connect");
            sock.set_nodelay(true).unwrap();
            let load = format!(
                "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n${}\r\n{}\r\n",
                RELEASE.len(),
                RELEASE
            );
            sock.write_all(load.as_bytes()).unwrap();
            let mut reply = [0u8; 128];
            let mut got = 0;
            while !reply[..got].ends_with(b"\r\n") || got < 10 {
                got += sock.read(&mut reply[got..]).unwrap();
            }
            // "$40\r\n<sha>\r\n"
            let text = String::from_utf8_lossy(&reply[..got]).to_string();
            sha = text.lines().nth(1).unwrap_or_default().to_string();
            sock.set_nonblocking(true).unwrap();
            conns.push(FConn {
                sock,
                buf: Vec::new(),
                owed: 0,
                waiting: false,
            });
        }
        Floor {
            quorum: ports.len() / 2 + 1,
            conns,
            sha,
            rng: seed | 1,
        }
    }

    fn token(&mut self) -> String {
        let mut s = String::with_capacity(40);
        for _ in 0..3 {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            s.push_str(&format!("{:016x}", self.rng));
        }
        s.truncate(40);
        s
    }

    /// One step: write `cmd` everywhere, wait until a quorum of `ok` replies or no quorum is
    /// possible. Returns the number of `ok` replies.
    fn step(&mut self, cmd: &[u8], ok: &dyn Fn(&[u8]) -> bool) -> usize {
        for c in &mut self.conns {
            let _ = c.sock.write_all(cmd);
            c.waiting = true;
        }
        let mut good = 0;
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let waiting = self.conns.iter().filter(|c| c.waiting).count();
            if good >= self.quorum || good + waiting < self.quorum || Instant::now() > deadline {
                break;
            }
            let mut fds: Vec<libc::pollfd> = self
                .conns
                .iter()
                .map(|c| libc::pollfd {
                    fd: c.sock.as_raw_fd(),
                    events: if c.waiting { libc::POLLIN } else { 0 },
                    revents: 0,
                })
                .collect();
            // SAFETY: a live array of initialised pollfds; poll writes only revents.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
            if n <= 0 {
                continue;
            }
            for (c, fd) in self.conns.iter_mut().zip(&fds) {
                if fd.revents == 0 {
                    continue;
                }
                for line in c.lines() {
                    if c.owed > 0 {
                        c.owed -= 1;
                    } else if c.waiting {
                        c.waiting = false;
                        if ok(&line) {
                            good += 1;
                        }
                    }
                }
            }
        }
        for c in &mut self.conns {
            if c.waiting {
                c.waiting = false;
                c.owed += 1;
            }
        }
        good
    }

    /// Acquires `key`: the token when a quorum granted it; otherwise releases whatever was
    /// granted (without waiting) and returns None.
    pub fn acquire(&mut self, key: &str, ttl_ms: u64) -> Option<String> {
        let token = self.token();
        let ttl = ttl_ms.to_string();
        let set = format!(
            "*6\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$40\r\n{token}\r\n$2\r\nNX\r\n$2\r\nPX\r\n${}\r\n{ttl}\r\n",
            key.len(),
            ttl.len()
        );
        if self.step(set.as_bytes(), &|l| l == b"+OK") >= self.quorum {
            return Some(token);
        }
        let release = self.release_cmd(key, &token);
        for c in &mut self.conns {
            let _ = c.sock.write_all(release.as_bytes());
            c.owed += 1;
        }
        None
    }

    /// Releases `key` held with `token`, returning once a quorum confirmed.
    pub fn release(&mut self, key: &str, token: &str) {
        let release = self.release_cmd(key, token);
        self.step(release.as_bytes(), &|l| l == b":1");
    }

    fn release_cmd(&self, key: &str, token: &str) -> String {
        format!(
            "*5\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n1\r\n${}\r\n{key}\r\n$40\r\n{token}\r\n",
            self.sha,
            key.len()
        )
    }

    /// Acquire then release `key`; false when the acquisition did not reach a quorum (then
    /// the release is sent without waiting).
    pub fn cycle(&mut self, key: &str, ttl_ms: u64) -> bool {
        let token = self.token();
        let ttl = ttl_ms.to_string();
        let set = format!(
            "*6\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$40\r\n{token}\r\n$2\r\nNX\r\n$2\r\nPX\r\n${}\r\n{ttl}\r\n",
            key.len(),
            ttl.len()
        );
        let release = format!(
            "*5\r\n$7\r\nEVALSHA\r\n$40\r\n{}\r\n$1\r\n1\r\n${}\r\n{key}\r\n$40\r\n{token}\r\n",
            self.sha,
            key.len()
        );
        let granted = self.step(set.as_bytes(), &|l| l == b"+OK");
        if granted >= self.quorum {
            self.step(release.as_bytes(), &|l| l == b":1");
            true
        } else {
            for c in &mut self.conns {
                let _ = c.sock.write_all(release.as_bytes());
                c.owed += 1;
            }
            false
        }
    }
}
