//! Host names resolved by a deadline. The standard library's look-up (`getaddrinfo`) blocks
//! for as long as the resolver takes, seconds when a DNS server is down, and cannot be
//! interrupted; a round must not wait past its nodes' time for it. So a name is looked up on
//! a thread of its own, and the caller waits for it until its deadline at most. A look-up
//! that outlives its caller goes on, and the next caller that asks for the same name takes its
//! result (one thread per name at a time, however many callers ask).
//!
//! A host that is an IP address needs no look-up and no thread.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// What a look-up gives: the first address, or why none.
type Found = Result<SocketAddr, String>;

/// How a name is looked up (the system resolver, or a test's).
type Resolve = dyn Fn(&str, u16) -> Found + Send + Sync;

/// One look-up in progress or finished, shared by every caller waiting for it.
#[derive(Default)]
struct Lookup {
    found: Mutex<Option<Found>>,
    done: Condvar,
}

/// Look-ups by host and port.
pub(crate) struct Lookups {
    pending: Mutex<HashMap<(String, u16), Arc<Lookup>>>,
    resolve: Arc<Resolve>,
}

impl Default for Lookups {
    fn default() -> Lookups {
        Lookups::with(Arc::new(system))
    }
}

/// `host:port` through the system resolver: its first address.
fn system(host: &str, port: u16) -> Found {
    let mut addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    addrs
        .next()
        .ok_or_else(|| format!("{host} resolves to no address"))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lookups {
    /// Look-ups through `resolve`.
    pub(crate) fn with(resolve: Arc<Resolve>) -> Lookups {
        Lookups {
            pending: Mutex::new(HashMap::new()),
            resolve,
        }
    }

    /// `host:port`'s first address, waiting for a look-up until `by` at most (not at all
    /// when `by` has passed). `Err` says why there is none: the name does not resolve, or its
    /// look-up has not finished by `by` (it goes on, for the next caller).
    pub(crate) fn resolve_by(&self, host: &str, port: u16, by: Instant) -> Found {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, port));
        }
        let key = (bare.to_string(), port);
        let lookup = {
            let mut pending = lock(&self.pending);
            match pending.get(&key) {
                Some(l) => Arc::clone(l),
                None => {
                    let l = Arc::new(Lookup::default());
                    self.start(bare, port, &l)?;
                    pending.insert(key.clone(), Arc::clone(&l));
                    l
                }
            }
        };
        let mut found = lock(&lookup.found);
        loop {
            if let Some(f) = found.clone() {
                drop(found);
                // Taken: the next caller looks the name up afresh (a failure is retried, an
                // address is not kept past its use).
                let mut pending = lock(&self.pending);
                if pending.get(&key).is_some_and(|l| Arc::ptr_eq(l, &lookup)) {
                    pending.remove(&key);
                }
                return f;
            }
            let now = Instant::now();
            if now >= by {
                return Err(format!(
                    "resolving {bare} takes longer than this call may wait; the look-up goes on"
                ));
            }
            found = (lookup.done)
                .wait_timeout(found, by - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Starts looking `host` up on a thread of its own, which fills `l` when done.
    fn start(&self, host: &str, port: u16, l: &Arc<Lookup>) -> Result<(), String> {
        let (name, l, resolve) = (host.to_string(), Arc::clone(l), Arc::clone(&self.resolve));
        std::thread::Builder::new()
            .name("redlock-dns".into())
            .spawn(move || {
                let f = resolve(&name, port);
                *lock(&l.found) = Some(f);
                l.done.notify_all();
            })
            .map(|_| ())
            .map_err(|e| format!("cannot start a thread to resolve {host}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// A resolver that answers `127.0.0.7` once the test lets it (`release`), counting the
    /// look-ups it was asked for.
    fn gated() -> (Lookups, mpsc::Sender<()>, Arc<AtomicUsize>) {
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let asked = Arc::new(AtomicUsize::new(0));
        let n = Arc::clone(&asked);
        let resolve = move |_: &str, port: u16| {
            n.fetch_add(1, Ordering::SeqCst);
            let _ = lock(&gate).recv();
            Ok(SocketAddr::new([127, 0, 0, 7].into(), port))
        };
        (Lookups::with(Arc::new(resolve)), release, asked)
    }

    #[test]
    fn an_ip_address_needs_no_look_up() {
        let (l, _release, asked) = gated();
        let past = Instant::now();
        let a = l.resolve_by("127.0.0.3", 7000, past).unwrap();
        assert_eq!(a, "127.0.0.3:7000".parse().unwrap());
        let a = l.resolve_by("[::1]", 7001, past).unwrap();
        assert_eq!(a, "[::1]:7001".parse().unwrap());
        assert_eq!(asked.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_slow_look_up_ends_the_wait_at_the_deadline_and_serves_the_next_caller() {
        let (l, release, asked) = gated();
        // The resolver is stuck: the caller gets an error at its deadline, not later.
        let by = Instant::now() + Duration::from_millis(30);
        let e = l.resolve_by("shard-1.example", 7000, by).unwrap_err();
        assert!(Instant::now() >= by);
        assert!(
            e.contains("shard-1.example") && e.contains("takes longer"),
            "{e}"
        );
        // A caller whose deadline has passed does not wait, nor start a second look-up.
        let e = l
            .resolve_by("shard-1.example", 7000, Instant::now())
            .unwrap_err();
        assert!(e.contains("takes longer"), "{e}");
        // Once the look-up ends, a caller takes its address.
        release.send(()).unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        let a = l.resolve_by("shard-1.example", 7000, far).unwrap();
        assert_eq!(a, "127.0.0.7:7000".parse().unwrap());
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        // Taken: the next caller looks the name up afresh.
        release.send(()).unwrap();
        let a = l.resolve_by("shard-1.example", 7000, far).unwrap();
        assert_eq!(a, "127.0.0.7:7000".parse().unwrap());
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn the_system_resolver_finds_localhost() {
        let l = Lookups::default();
        let far = Instant::now() + Duration::from_secs(60);
        assert!(
            l.resolve_by("localhost", 6379, far)
                .unwrap()
                .ip()
                .is_loopback()
        );
    }
}
