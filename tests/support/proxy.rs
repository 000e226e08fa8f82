//! A TCP delay proxy on loopback: every byte is delivered a fixed one-way delay after it
//! arrived, in each direction, preserving order. The kernels these tests run on have no netem,
//! so this is how latency is injected. Each connection gets two pump pairs (reader → timed
//! queue → writer); the proxy is stopped, and its connections closed, when dropped. Its
//! upstream can be moved to another server ([`DelayProxy::move_to`]): an address that leads to
//! another server after a failover, as a managed service's primary endpoint does.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Sender, unbounded};

/// A running proxy from `127.0.0.1:port` to an upstream loopback port.
pub struct DelayProxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    delay: Arc<Mutex<Duration>>,
    upstream: Arc<AtomicU16>,
    accept: Option<JoinHandle<()>>,
}

impl DelayProxy {
    /// Starts forwarding `127.0.0.1:<new port>` to `127.0.0.1:upstream` with `one_way` delay
    /// in each direction (so `2 × one_way` added to every round trip).
    pub fn start(upstream: u16, one_way: Duration) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let delay = Arc::new(Mutex::new(one_way));
        let upstream = Arc::new(AtomicU16::new(upstream));
        let (s, c, d) = (Arc::clone(&stop), Arc::clone(&conns), Arc::clone(&delay));
        let up = Arc::clone(&upstream);
        let accept = thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let to = up.load(Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], to))) else {
                    continue; // upstream down: the client sees the connection close
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut all = c.lock().unwrap();
                    all.push(client.try_clone().unwrap());
                    all.push(server.try_clone().unwrap());
                }
                pump(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    Arc::clone(&d),
                );
                pump(server, client, Arc::clone(&d));
            }
        });
        DelayProxy {
            port,
            stop,
            conns,
            delay,
            upstream,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Moves the address to the server on `upstream`: connections from now on lead there,
    /// and the open ones are closed (a failover behind one address).
    pub fn move_to(&self, upstream: u16) {
        self.upstream.store(upstream, Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Changes the delay for data arriving from now on.
    pub fn set_delay(&self, one_way: Duration) {
        *self.delay.lock().unwrap() = one_way;
    }
}

/// Bytes read, and when to deliver them.
type Chunk = (Instant, Vec<u8>);

/// Copies `from` → `to`, delivering each chunk `delay` after it was read.
fn pump(mut from: TcpStream, to: TcpStream, delay: Arc<Mutex<Duration>>) {
    let (tx, rx): (Sender<Chunk>, Receiver<Chunk>) = unbounded();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let at = Instant::now() + *delay.lock().unwrap();
                    if tx.send((at, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `tx` ends the writer once everything queued is delivered.
    });
    thread::spawn(move || {
        let mut to = to;
        for (at, data) in rx {
            let now = Instant::now();
            if at > now {
                thread::sleep(at - now);
            }
            if to.write_all(&data).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], self.port)));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}
