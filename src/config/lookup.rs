//! Host names resolved by a deadline. The standard library's look-up (`getaddrinfo`) blocks
//! for as long as the resolver takes, seconds when a DNS server is down, and cannot be
//! interrupted; a round must not wait past its nodes' time for it. So a name is looked up on
//! a thread of its own, and the caller waits for it until its deadline at most. A look-up
//! that outlives its caller goes on, and the next caller that asks for the same name takes its
//! result (one thread per name at a time, however many callers ask).
//!
//! A host that is an IP address needs no look-up and no thread. The resolver is the
//! system's, or the one [`Config::resolver`](crate::Config::resolver) gives.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a look-up gives: the first address, or why none.
type Found = Result<SocketAddr, String>;

/// A resolver as [`Config::resolver`](crate::Config::resolver) takes it.
pub(crate) type ResolveFn = dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync;

/// How host names become addresses: the system's resolver (`getaddrinfo`) or the caller's.
#[derive(Clone)]
pub(crate) struct Resolver(Option<Arc<ResolveFn>>);

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Resolver(custom)"
        } else {
            "Resolver(system)"
        })
    }
}

impl Resolver {
    /// The system's resolver.
    pub(crate) fn system() -> Resolver {
        Resolver(None)
    }

    /// The caller's.
    pub(crate) fn custom(f: Arc<ResolveFn>) -> Resolver {
        Resolver(Some(f))
    }

    /// `host:port`'s addresses, now (blocking for as long as the resolver takes); never
    /// empty. An IP address is itself, without the resolver.
    pub(crate) fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let addrs: Vec<SocketAddr> = match &self.0 {
            Some(f) => f(bare, port),
            None => (bare, port).to_socket_addrs().map(Iterator::collect),
        }
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
        if addrs.is_empty() {
            return Err(format!("{host} resolves to no address"));
        }
        Ok(addrs)
    }
}

/// One look-up in progress or finished (with when), shared by every caller waiting for it.
#[derive(Default)]
struct Lookup {
    found: Mutex<Option<(Found, Instant)>>,
    done: Condvar,
}

/// A finished look-up older than this is not used (by default): its name is looked up
/// again.
const FRESH: Duration = Duration::from_secs(10);

impl super::Config {
    /// How host names in the node URLs become addresses, in place of the system's resolver
    /// (`getaddrinfo`): a service registry, a resolver of your own, a test. `f(host, port)`
    /// returns the addresses of `host` (the first is used); an error or none fails that use
    /// of the name. An IP address is never passed to it.
    ///
    /// It is called when the manager is made (blocking, as the system's is) for plain nodes,
    /// a cluster's first seed and a group's sentinels, and later on a look-up thread: for a
    /// plain node or shard named by a host name at every reconnection (a managed endpoint
    /// whose name moves to a promoted replica is followed there), for a cluster's shards and
    /// for the master sentinels name. A call never waits for a late look-up past its
    /// deadline; the last address known is used meanwhile. Defaults to the system's.
    ///
    /// ```
    /// use std::net::SocketAddr;
    /// let cfg = redlock::Config::new(["redis://cache.internal:6379"]).resolver(|host, port| {
    ///     match host {
    ///         "cache.internal" => Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))]),
    ///         _ => Err(std::io::Error::other(format!("unknown host {host}"))),
    ///     }
    /// });
    /// assert_eq!(cfg.node_urls(), ["redis://cache.internal:6379"]);
    /// ```
    pub fn resolver(
        mut self,
        f: impl Fn(&str, u16) -> std::io::Result<Vec<std::net::SocketAddr>> + Send + Sync + 'static,
    ) -> super::Config {
        self.resolver = Resolver::custom(std::sync::Arc::new(f));
        self
    }
}

/// Look-ups by host and port.
pub(crate) struct Lookups {
    pending: Mutex<HashMap<(String, u16), Arc<Lookup>>>,
    resolver: Resolver,
    fresh: Duration,
}

impl Default for Lookups {
    fn default() -> Lookups {
        Lookups::with(Resolver::system())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lookups {
    /// Look-ups through `resolver`.
    pub(crate) fn with(resolver: Resolver) -> Lookups {
        Lookups {
            pending: Mutex::new(HashMap::new()),
            resolver,
            fresh: FRESH,
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
            let fresh = |l: &Arc<Lookup>| {
                lock(&l.found)
                    .as_ref()
                    .is_none_or(|(_, at)| at.elapsed() < self.fresh)
            };
            match pending.get(&key).filter(|l| fresh(l)) {
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
            if let Some((f, _)) = found.clone() {
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
            if crate::park::is_parked() {
                // Under an event loop: look again each millisecond, the loop running meanwhile.
                drop(found);
                crate::park::pause((by - now).min(Duration::from_millis(1)));
                found = lock(&lookup.found);
                continue;
            }
            found = (lookup.done)
                .wait_timeout(found, by - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// What `host:port` resolves to by `by`, or `last` when the look-up is late or fails: an
    /// address looked up again before it is used again (a change is logged).
    pub(crate) fn refresh(
        &self,
        host: &str,
        port: u16,
        by: Instant,
        last: SocketAddr,
    ) -> SocketAddr {
        match self.resolve_by(host, port, by) {
            Ok(a) => {
                if a != last {
                    log::warn!("{host}:{port} now resolves to {a} (was {last})");
                }
                a
            }
            Err(why) => {
                log::debug!("{host}:{port}: {why}; using {last}");
                last
            }
        }
    }

    /// Starts looking `host` up on a thread of its own, which fills `l` when done.
    fn start(&self, host: &str, port: u16, l: &Arc<Lookup>) -> Result<(), String> {
        let (name, l, resolver) = (host.to_string(), Arc::clone(l), self.resolver.clone());
        std::thread::Builder::new()
            .name("redlock-dns".into())
            .spawn(move || {
                let f = resolver.resolve(&name, port).map(|a| a[0]);
                *lock(&l.found) = Some((f, Instant::now()));
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
            Ok(vec![SocketAddr::new([127, 0, 0, 7].into(), port)])
        };
        let r = Resolver::custom(Arc::new(resolve));
        (Lookups::with(r), release, asked)
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
    fn a_look_up_that_ended_long_ago_is_not_used() {
        let (mut l, release, asked) = gated();
        l.fresh = Duration::from_millis(20);
        // A look-up that outlives its caller, and ends.
        let e = l
            .resolve_by("old.example", 7000, Instant::now())
            .unwrap_err();
        assert!(e.contains("takes longer"), "{e}");
        release.send(()).unwrap();
        let ended = (0..1000).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            lock(&l.pending).values().all(|p| lock(&p.found).is_some())
        });
        assert!(ended);
        std::thread::sleep(Duration::from_millis(40));
        // Its answer is too old: the next caller starts a new look-up, and takes that one.
        release.send(()).unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        l.resolve_by("old.example", 7000, far).unwrap();
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
