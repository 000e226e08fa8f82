//! The benchmark's delay proxy (the one of tests/support/proxy.rs, which examples/bench
//! uses): a loopback TCP proxy that delivers each chunk, each way, `delay` after it was read,
//! on threads of its own. Run by bench/proxy.mjs in a process of its own; never by the
//! binding itself.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use napi::Result;
use napi_derive::napi;

fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0
                || tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    });
    thread::spawn(move || {
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

/// Starts a proxy to 127.0.0.1:`upstream` with `delay_us` one way; returns its port. It runs
/// until the process exits.
#[napi]
pub fn start_delay_proxy(upstream: u16, delay_us: u32) -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let delay = Duration::from_micros(delay_us.into());
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], upstream)))
            else {
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                continue;
            };
            pump(client, s2, delay);
            pump(server, c2, delay);
        }
    });
    Ok(port)
}
