//! What a client knows of one node beyond its connection: its address, the handshake its
//! connections start with, its identity (`run_id`, uptime), restarts seen, restart
//! quarantine, and the reconnect backoff after failures.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::NodeAddr;
use crate::resp::{self, Reply};

/// Settings that apply to every connection of a manager.
#[derive(Clone, Debug)]
pub(crate) struct ConnSettings {
    pub connect_timeout: Duration,
    pub stale_limit: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

/// What a handshake command is for, and so what an error reply to it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hs {
    /// `AUTH`, `SELECT`, `SCRIPT LOAD`: an error makes the node unusable as configured.
    Required,
    /// `INFO server`: the node's identity and age; an error only disables restart detection.
    Info,
    /// `CONFIG GET appendonly|appendfsync`: an error only means the setting is unknown.
    Config,
}

/// A node's identity as of its last handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `run_id`: changes whenever the server process restarts.
    pub run_id: String,
    /// `uptime_in_seconds` (whole seconds, truncated by the server).
    pub uptime: Duration,
    /// When the reply was read (client monotonic clock): the uptime was at least `uptime` then.
    pub seen_at: Instant,
}

/// Restart quarantine's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuarantinePolicy {
    pub enabled: bool,
    pub max_ttl: Duration,
}

/// A configured node and its shared state.
pub(crate) struct Node {
    pub index: usize,
    pub addr: NodeAddr,
    /// `addr` as text, passwords redacted (reports copy it rather than format it each time).
    pub addr_text: String,
    pub sockaddr: Option<SocketAddr>,
    /// The bytes every new connection starts with, and what each reply to them means.
    pub handshake: Vec<u8>,
    pub handshake_kinds: Vec<Hs>,
    policy: QuarantinePolicy,
    failures: AtomicU32,
    health: Mutex<Health>,
    identity: Mutex<Option<Identity>>,
    /// Restarts seen (a changed run_id on reconnect).
    restarts: AtomicU64,
    info_warned: AtomicBool,
    persistence: Mutex<Persistence>,
}

#[derive(Default)]
struct Persistence {
    appendonly: Option<String>,
    appendfsync: Option<String>,
    answered: usize,
    warned: bool,
}

#[derive(Default)]
struct Health {
    retry_at: Option<Instant>,
    last_error: String,
    /// A warning was logged in the current failure streak.
    warned: bool,
}

impl Node {
    /// A node reached at `sockaddr`, with the handshake its address asks for (`AUTH`,
    /// `SELECT`) followed by `SCRIPT LOAD` of every script and `INFO server` (identity and
    /// uptime, for restart detection). With quarantine off, it also reads `appendonly` and
    /// `appendfsync`, to warn about a node that does not persist every write.
    pub(crate) fn new(
        index: usize,
        addr: NodeAddr,
        sockaddr: Option<SocketAddr>,
        scripts: &[&str],
        policy: QuarantinePolicy,
    ) -> Node {
        let mut handshake = Vec::new();
        let mut kinds = Vec::new();
        if let Some(pw) = addr.password() {
            match addr.username() {
                Some(user) => {
                    resp::pack(&[b"AUTH", user.as_bytes(), pw.as_bytes()], &mut handshake)
                }
                None => resp::pack(&[b"AUTH", pw.as_bytes()], &mut handshake),
            }
            kinds.push(Hs::Required);
        }
        if addr.db() != 0 {
            resp::pack(
                &[b"SELECT", addr.db().to_string().as_bytes()],
                &mut handshake,
            );
            kinds.push(Hs::Required);
        }
        for s in scripts {
            resp::pack(&[b"SCRIPT", b"LOAD", s.as_bytes()], &mut handshake);
            kinds.push(Hs::Required);
        }
        resp::pack(&[b"INFO", b"server"], &mut handshake);
        kinds.push(Hs::Info);
        if !policy.enabled {
            for setting in [&b"appendonly"[..], b"appendfsync"] {
                resp::pack(&[b"CONFIG", b"GET", setting], &mut handshake);
                kinds.push(Hs::Config);
            }
        }
        Node {
            index,
            addr_text: addr.to_string(),
            addr,
            sockaddr,
            handshake,
            handshake_kinds: kinds,
            policy,
            failures: AtomicU32::new(0),
            health: Mutex::new(Health::default()),
            identity: Mutex::new(None),
            restarts: AtomicU64::new(0),
            info_warned: AtomicBool::new(false),
            persistence: Mutex::new(Persistence::default()),
        }
    }

    /// A node with no address and no handshake (unit tests over socket pairs).
    #[cfg(test)]
    pub(crate) fn bare(index: usize) -> Node {
        let mut n = Node::new(
            index,
            NodeAddr::parse(&format!("127.0.0.1:{}", 1 + index)).unwrap(),
            None,
            &[],
            QuarantinePolicy {
                enabled: true,
                max_ttl: Duration::from_secs(60),
            },
        );
        n.handshake.clear();
        n.handshake_kinds.clear();
        n
    }

    /// The node's identity as of its last handshake, if it answered `INFO`.
    pub(crate) fn identity(&self) -> Option<Identity> {
        self.identity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Restarts seen so far (a new run_id on reconnect).
    pub(crate) fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// How much longer this node stays in restart quarantine, if it is in it at `now`.
    ///
    /// Redis computes `uptime_in_seconds` as the difference of two whole wall-clock seconds
    /// (now and its start, each truncated), so it can read up to a second more than the
    /// node's real age (started at 10.9 s, asked at 11.1 s: uptime 1, age 0.2 s). The reply
    /// was read at `seen_at`, after it was produced, so the node started no later than
    /// `seen_at − uptime + 1 s`, and it leaves quarantine a maximum TTL after that:
    /// `seen_at − uptime + max_ttl + 1 s`. Every uncertainty rounds toward a longer
    /// quarantine. (A node whose wall clock jumps defeats any uptime-based rule.)
    pub(crate) fn quarantine(&self, now: Instant) -> Option<Duration> {
        if !self.policy.enabled {
            return None;
        }
        let id = self.identity()?;
        let span = (self.policy.max_ttl + Duration::from_secs(1)).checked_sub(id.uptime)?;
        let until = id.seen_at + span;
        (until > now).then(|| until - now)
    }

    /// Handles the reply to one handshake command; `Err` with the server's text when the
    /// node cannot be used as configured.
    pub(crate) fn on_handshake_reply(
        &self,
        kind: Hs,
        reply: &Reply,
        now: Instant,
    ) -> Result<(), String> {
        match (kind, reply) {
            (Hs::Required, Reply::Error { text, .. }) => Err(text.clone()),
            (Hs::Required, _) => Ok(()),
            (Hs::Info, r) => {
                self.observe_info(r, now);
                Ok(())
            }
            (Hs::Config, r) => {
                self.observe_config(r);
                Ok(())
            }
        }
    }

    /// Reads `run_id` and `uptime_in_seconds` from an `INFO server` reply.
    fn observe_info(&self, reply: &Reply, now: Instant) {
        let text = match reply {
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => {
                if !self.info_warned.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "node {} ({}) does not answer INFO ({}): restarts of this node cannot \
                         be detected, so restart quarantine cannot protect it",
                        self.index,
                        self.addr,
                        other.describe()
                    );
                }
                return;
            }
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        };
        let (Some(run_id), Some(uptime)) = (
            field("run_id"),
            field("uptime_in_seconds").and_then(|u| u.parse::<u64>().ok()),
        ) else {
            return;
        };
        let mut id = self.identity.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = id.as_ref()
            && old.run_id != run_id
        {
            self.restarts.fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "node {} ({}) restarted (new run_id; up for {uptime} s)",
                self.index,
                self.addr
            );
        }
        *id = Some(Identity {
            run_id,
            uptime: Duration::from_secs(uptime),
            seen_at: now,
        });
    }

    /// Reads a `CONFIG GET appendonly|appendfsync` reply; once both are in, warns (once) if
    /// the node does not persist every write.
    fn observe_config(&self, reply: &Reply) {
        let mut p = self.persistence.lock().unwrap_or_else(|p| p.into_inner());
        p.answered += 1;
        if let Reply::Array(items) = reply
            && let [Reply::Bulk(k), Reply::Bulk(v)] = items.as_slice()
        {
            let v = String::from_utf8_lossy(v).into_owned();
            match k.as_slice() {
                b"appendonly" => p.appendonly = Some(v),
                b"appendfsync" => p.appendfsync = Some(v),
                _ => {}
            }
        }
        if p.answered < 2 || p.warned {
            return;
        }
        p.warned = true;
        match (p.appendonly.as_deref(), p.appendfsync.as_deref()) {
            (Some("yes"), Some("always")) => {}
            (Some(aof), Some(fsync)) => log::warn!(
                "node {} ({}) does not persist every write (appendonly {aof}, appendfsync \
                 {fsync}) and restart quarantine is off: if it restarts it may grant a lock \
                 that another client holds",
                self.index,
                self.addr
            ),
            _ => log::warn!(
                "node {} ({}): cannot read its persistence settings (CONFIG GET refused) and \
                 restart quarantine is off: make sure it runs with appendfsync always",
                self.index,
                self.addr
            ),
        }
    }

    /// The last failure, while the node waits out its reconnect backoff at `now`.
    pub(crate) fn backoff(&self, now: Instant) -> Option<String> {
        if self.failures.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        match h.retry_at {
            Some(t) if now < t => Some(h.last_error.clone()),
            _ => None,
        }
    }

    /// Records a failure. Connection-level failures start (or lengthen) the reconnect backoff
    /// and warn once per failure streak; timeouts and error replies only count.
    pub(crate) fn record_failure(
        &self,
        now: Instant,
        what: &str,
        settings: &ConnSettings,
        connection: bool,
    ) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        h.last_error = what.to_string();
        if connection {
            let shift = (n - 1).min(20);
            let wait = settings
                .backoff_min
                .saturating_mul(1u32 << shift)
                .min(settings.backoff_max);
            h.retry_at = Some(now + wait);
            if !h.warned {
                h.warned = true;
                log::warn!("node {} ({}) unreachable: {what}", self.index, self.addr);
            }
        }
        log::debug!("node {} ({}): {what}", self.index, self.addr);
    }

    /// Ends a failure streak (a handshake or a reply came through).
    pub(crate) fn record_success(&self) {
        if self.failures.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        self.failures.store(0, Ordering::Relaxed);
        if h.warned {
            log::info!("node {} ({}) reachable again", self.index, self.addr);
        }
        h.warned = false;
        h.retry_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ConnSettings {
        ConnSettings {
            connect_timeout: Duration::from_millis(100),
            stale_limit: Duration::from_secs(5),
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(40),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum_and_ends_on_success() {
        let n = Node::bare(0);
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        n.record_failure(t0, "refused", &settings(), true);
        assert_eq!(n.backoff(t0).as_deref(), Some("refused"));
        assert!(n.backoff(t0 + Duration::from_millis(10)).is_none());
        n.record_failure(t0, "refused", &settings(), true);
        assert!(n.backoff(t0 + Duration::from_millis(19)).is_some());
        for _ in 0..5 {
            n.record_failure(t0, "refused", &settings(), true);
        }
        assert!(n.backoff(t0 + Duration::from_millis(40)).is_none());
        n.record_success();
        assert!(n.backoff(t0).is_none());
        // A timeout counts but does not back off.
        n.record_failure(t0, "timeout", &settings(), false);
        assert!(n.backoff(t0).is_none());
    }

    #[test]
    fn info_sets_the_identity_and_a_new_run_id_counts_a_restart() {
        let n = Node::bare(0);
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        let info = |id: &str, up: u64| {
            Reply::Bulk(format!("# Server\r\nrun_id:{id}\r\nuptime_in_seconds:{up}\r\n").into())
        };
        n.on_handshake_reply(Hs::Info, &info("a", 5), t0).unwrap();
        assert_eq!(n.identity().unwrap().run_id, "a");
        assert_eq!(n.restarts(), 0);
        // Up 5 s with a 60 s maximum TTL: quarantined for 60 + 1 − 5 = 56 s.
        assert_eq!(n.quarantine(t0), Some(Duration::from_secs(56)));
        n.on_handshake_reply(Hs::Info, &info("b", 100), t0).unwrap();
        assert_eq!(n.restarts(), 1);
        assert_eq!(n.quarantine(t0), None);
        let err = Reply::Error {
            code: "WRONGPASS".into(),
            text: "WRONGPASS invalid".into(),
        };
        assert!(n.on_handshake_reply(Hs::Required, &err, t0).is_err());
        assert!(n.on_handshake_reply(Hs::Info, &err, t0).is_ok());
    }
}
