//! What a client knows of one node beyond its connection: its address, the handshake its
//! connections start with, its identity (`run_id`, uptime), restarts seen, restart
//! quarantine, and the reconnect backoff after failures.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::{MARKER_KEY, NodeAddr};
use crate::error::{NodeOutcome, QuarantineReason};
use crate::resp::{self, Reply};
use crate::timing::RttEstimate;
use crate::tls;

/// What a node in Redis Cluster mode is told: its keys live on other nodes (it answers
/// `MOVED`, `ASK`, `CLUSTERDOWN`, …), and Redlock needs independent masters, each holding
/// every lock key it is asked about.
pub(crate) const CLUSTER_UNSUPPORTED: &str = "cluster mode is not supported (yet)";

/// The error codes that say the node refused this client's credentials: a failed `AUTH`
/// (`WRONGPASS`), a password required but not given (`NOAUTH`), an ACL user not allowed a
/// command or a key (`NOPERM`).
const AUTH_CODES: [&str; 3] = ["WRONGPASS", "NOAUTH", "NOPERM"];

/// What a reply means whatever was asked, if it refuses this client's credentials.
pub(crate) fn auth_refusal(reply: &Reply) -> Option<NodeOutcome> {
    match reply {
        Reply::Error { code, text } if AUTH_CODES.contains(&code.as_str()) => {
            Some(NodeOutcome::AuthFailed(text.clone()))
        }
        _ => None,
    }
}

/// What a reply means whatever was asked, if the node refuses our credentials or runs in
/// cluster mode (see [`auth_refusal`], [`cluster_refusal`]).
pub(crate) fn refusal(reply: &Reply) -> Option<NodeOutcome> {
    auth_refusal(reply).or_else(|| cluster_refusal(reply))
}

/// A failure as the node's health records it: the outcome's text.
pub(crate) fn describe(o: &NodeOutcome) -> String {
    match o {
        NodeOutcome::Unreachable(s)
        | NodeOutcome::Protocol(s)
        | NodeOutcome::Tls(s)
        | NodeOutcome::ServerError(s)
        | NodeOutcome::AuthFailed(s) => s.clone(),
        NodeOutcome::Timeout => "timeout".into(),
        other => format!("{other:?}"),
    }
}

/// The error codes only a node in cluster mode answers.
const CLUSTER_CODES: [&str; 5] = ["MOVED", "ASK", "CLUSTERDOWN", "CROSSSLOT", "TRYAGAIN"];

/// What a reply means whatever was asked, if it says the node is in cluster mode: a
/// `ServerError` that says cluster mode is not supported, with the server's text.
pub(crate) fn cluster_refusal(reply: &Reply) -> Option<NodeOutcome> {
    match reply {
        Reply::Error { code, text } if CLUSTER_CODES.contains(&code.as_str()) => Some(
            NodeOutcome::ServerError(format!("{CLUSTER_UNSUPPORTED}: the node answered {text}")),
        ),
        _ => None,
    }
}

/// Settings that apply to every connection of a manager.
#[derive(Clone, Debug)]
pub(crate) struct ConnSettings {
    pub connect_timeout: Duration,
    pub stale_limit: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

/// What a handshake or health command is for, and so what its reply means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hs {
    /// `AUTH`: any error means the credentials were refused (`WRONGPASS`, or a password the
    /// server does not expect).
    Auth,
    /// `SELECT`, `SCRIPT LOAD`: an error makes the node unusable as configured.
    Required,
    /// `INFO cluster`: a node with `cluster_enabled:1` is refused (see
    /// [`CLUSTER_UNSUPPORTED`]); an error reply only skips the check (`INFO` renamed), and
    /// the replies to later commands still tell (see [`cluster_refusal`]).
    Cluster,
    /// `INFO server`: the node's identity and age; an error only disables restart detection.
    Info,
    /// `GET` of the quarantine marker, in the handshake: decides whether the node is trusted.
    Marker,
    /// `CONFIG GET appendonly|appendfsync`: an error only means the setting is unknown.
    Config,
    /// After the handshake: a re-read of the marker of a quarantined node (another process
    /// may have ended its quarantine).
    MarkerProbe,
    /// After the handshake: our write of the marker.
    MarkerWrite,
}

/// What the link must do after a handshake or health reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    None,
    /// Write the marker with this `run_id` (before anything held behind the handshake).
    WriteMarker(String),
}

/// Whether a node's grants count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Not heard from yet (no handshake read): asked, but its grants do not count.
    Unknown,
    /// Its grants count.
    Trusted,
    /// It has no marker, and no node has shown one yet: trusted or quarantined once every
    /// node has answered (see quorum/trust.rs).
    Undecided { since: Instant },
    /// Its grants do not count until `until`.
    Quarantined {
        until: Instant,
        reason: QuarantineReason,
    },
}

/// What the marker held when last read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Marker {
    /// Not read (or unreadable).
    Unread,
    Missing,
    /// Some `run_id`: the current one or an earlier one.
    Holds(String),
}

/// The trust state of one node.
struct Trust {
    standing: Standing,
    /// The marker as of the last handshake or probe.
    marker: Marker,
    /// The marker is known to hold the current `run_id` (read back, or our write confirmed).
    marker_present: bool,
    /// The `run_id` changed at the last handshake.
    restarted: bool,
    /// When this manager first saw the current `run_id`.
    first_seen: Option<Instant>,
    /// When a quarantined node's marker is read again next, and the wait after that.
    next_probe: Option<Instant>,
    probe_wait: Duration,
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

/// The `run_id` of every node of one manager: two configured addresses that reach the same
/// server (`127.0.0.1:P`, `127.0.0.2:P`, `[::1]:P`) must never both count, or that server
/// would vote twice. Updated by every handshake, so nodes contacted late are checked too.
pub(crate) struct Peers {
    run_ids: Mutex<Vec<Option<String>>>,
    /// Per node, the lower-indexed node it duplicates (`usize::MAX`: none).
    duplicate_of: Vec<AtomicUsize>,
}

impl Peers {
    pub(crate) fn new(nodes: usize) -> Arc<Peers> {
        Arc::new(Peers {
            run_ids: Mutex::new(vec![None; nodes]),
            duplicate_of: (0..nodes).map(|_| AtomicUsize::new(usize::MAX)).collect(),
        })
    }

    /// Node `i` reported `run_id`; returns the node it duplicates, if it newly does.
    fn observe(&self, i: usize, run_id: &str) -> Option<usize> {
        let mut ids = self.run_ids.lock().unwrap_or_else(|p| p.into_inner());
        ids[i] = Some(run_id.to_string());
        let mut new = None;
        for k in 0..ids.len() {
            let of = (0..k).find(|&j| ids[j].is_some() && ids[j] == ids[k]);
            let was = self.duplicate_of[k].swap(of.unwrap_or(usize::MAX), Ordering::AcqRel);
            if k == i && of.is_some() && was == usize::MAX {
                new = of;
            }
            if k != i && of == Some(i) && was == usize::MAX {
                new = Some(k); // a lower node joined a higher one: report the pair
            }
        }
        new
    }

    fn duplicate_of(&self, i: usize) -> Option<usize> {
        let d = self.duplicate_of[i].load(Ordering::Acquire);
        (d != usize::MAX).then_some(d)
    }
}

/// The value of the field `name` in the text of an `INFO` reply (`name:value` lines).
fn info_field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The first and the longest wait between two reads of a quarantined node's marker.
const PROBE_MIN: Duration = Duration::from_millis(10);
const PROBE_MAX: Duration = Duration::from_secs(1);

fn quarantined(until: Instant, reason: QuarantineReason) -> Standing {
    Standing::Quarantined { until, reason }
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
    /// For a `rediss://` node: what its connections' TLS sessions start from.
    pub tls: Option<tls::Client>,
    /// The bytes every new connection starts with, and what each reply to them means.
    pub handshake: Vec<u8>,
    pub handshake_kinds: Vec<Hs>,
    policy: QuarantinePolicy,
    peers: Arc<Peers>,
    failures: AtomicU32,
    health: Mutex<Health>,
    identity: Mutex<Option<Identity>>,
    trust: Mutex<Trust>,
    /// Restarts seen (a changed run_id on reconnect).
    restarts: AtomicU64,
    /// Connections opened to it (the shared one: the first and every reconnect).
    connections: AtomicU64,
    /// Its round trips, for its per-step timeout (see [`RttEstimate`]).
    pub rtt: RttEstimate,
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
    last_error: Option<NodeOutcome>,
    /// A warning was logged in the current failure streak.
    warned: bool,
}

/// The commands a connection to `addr` starts with whatever it is for: `AUTH` when the address
/// has a password, `SELECT` when it names a database. Returns them and how many there are.
pub(crate) fn auth_and_select(addr: &NodeAddr) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut n = 0;
    if let Some(pw) = addr.password() {
        match addr.username() {
            Some(user) => resp::pack(&[b"AUTH", user.as_bytes(), pw.as_bytes()], &mut out),
            None => resp::pack(&[b"AUTH", pw.as_bytes()], &mut out),
        }
        n += 1;
    }
    if addr.db() != 0 {
        resp::pack(&[b"SELECT", addr.db().to_string().as_bytes()], &mut out);
        n += 1;
    }
    (out, n)
}

impl Node {
    /// A node reached at `sockaddr`, with the handshake its address asks for (`AUTH`, then
    /// `INFO cluster`, which refuses a node in cluster mode, then `SELECT`) followed by
    /// `SCRIPT LOAD` of every script and `INFO server` (identity and uptime, for restart
    /// detection). With quarantine off, it also reads `appendonly` and
    /// `appendfsync`, to warn about a node that does not persist every write. With `tls`, its
    /// connections are TLS.
    #[allow(clippy::too_many_arguments)] // each is one fact about the node, named at the call
    pub(crate) fn new(
        index: usize,
        addr: NodeAddr,
        sockaddr: Option<SocketAddr>,
        tls: Option<tls::Client>,
        scripts: &[&str],
        policy: QuarantinePolicy,
        peers: Arc<Peers>,
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
            kinds.push(Hs::Auth);
        }
        // Before SELECT, which a cluster node refuses with a message that does not say why.
        resp::pack(&[b"INFO", b"cluster"], &mut handshake);
        kinds.push(Hs::Cluster);
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
        if policy.enabled {
            resp::pack(&[b"GET", MARKER_KEY], &mut handshake);
            kinds.push(Hs::Marker);
        } else {
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
            tls,
            handshake,
            handshake_kinds: kinds,
            policy,
            peers,
            failures: AtomicU32::new(0),
            health: Mutex::new(Health::default()),
            identity: Mutex::new(None),
            trust: Mutex::new(Trust {
                standing: if policy.enabled {
                    Standing::Unknown
                } else {
                    Standing::Trusted
                },
                marker: Marker::Unread,
                marker_present: false,
                restarted: false,
                first_seen: None,
                next_probe: None,
                probe_wait: PROBE_MIN,
            }),
            restarts: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            rtt: RttEstimate::default(),
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
            None,
            &[],
            QuarantinePolicy {
                enabled: true,
                max_ttl: Duration::from_secs(60),
            },
            Peers::new(index + 1),
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

    /// Counts a connection opened to this node.
    pub(crate) fn connected(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections opened to this node so far (the shared one's first and every reconnect).
    pub(crate) fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    fn lock_trust(&self) -> std::sync::MutexGuard<'_, Trust> {
        self.trust.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lower-indexed node this one reaches the same server as, if any: it then counts in
    /// no round.
    pub(crate) fn duplicate_of(&self) -> Option<usize> {
        self.peers.duplicate_of(self.index)
    }

    /// Whether the node's grants count now.
    pub(crate) fn standing(&self) -> Standing {
        self.lock_trust().standing
    }

    /// True when the node's grants count.
    pub(crate) fn trusted(&self) -> bool {
        self.standing() == Standing::Trusted
    }

    /// How much longer this node stays in restart quarantine, and why, if it is in it at
    /// `now` (an undecided node: zero remaining). `None` when trusted or not heard from yet.
    pub(crate) fn quarantine(&self, now: Instant) -> Option<(Duration, QuarantineReason)> {
        match self.standing() {
            Standing::Quarantined { until, reason } => {
                Some((until.saturating_duration_since(now), reason))
            }
            Standing::Undecided { since } => Some((
                (since + self.policy.max_ttl).saturating_duration_since(now),
                QuarantineReason::Undecided,
            )),
            Standing::Trusted | Standing::Unknown => None,
        }
    }

    /// The latest instant the node can have started, from the last `INFO`: Redis computes
    /// `uptime_in_seconds` as the difference of two whole wall-clock seconds (now and its
    /// start, each truncated), so it can read up to a second more than the node's real age
    /// (started at 10.9 s, asked at 11.1 s: uptime 1, age 0.2 s). The reply was read at
    /// `seen_at`, after it was produced, so the node started no later than
    /// `seen_at − uptime + 1 s`. Every uncertainty rounds toward a longer quarantine. (A node
    /// whose wall clock jumps defeats any uptime-based rule.)
    fn started_by(&self) -> Option<Instant> {
        let id = self.identity()?;
        let back = id
            .uptime
            .checked_sub(Duration::from_secs(1))
            .unwrap_or_default();
        Some(id.seen_at.checked_sub(back).unwrap_or(id.seen_at))
    }

    /// True when the node has been up for less than the maximum TTL at `now` (or its age is
    /// unknown).
    pub(crate) fn young(&self, now: Instant) -> bool {
        self.started_by()
            .is_none_or(|s| s + self.policy.max_ttl > now)
    }

    /// True once a handshake of this node has been read.
    pub(crate) fn heard_from(&self) -> bool {
        self.standing() != Standing::Unknown
    }

    /// True when this node's marker (current or stale) has been seen: the cluster has met
    /// this library before.
    pub(crate) fn marker_seen(&self) -> bool {
        let t = self.lock_trust();
        t.marker_present || matches!(t.marker, Marker::Holds(_))
    }

    /// Handles the reply to one handshake or health command; `Err` with what to report when
    /// the node cannot be used as configured (the server's error, or cluster mode).
    pub(crate) fn on_handshake_reply(
        &self,
        kind: Hs,
        reply: &Reply,
        now: Instant,
    ) -> Result<Action, NodeOutcome> {
        match (kind, reply) {
            (Hs::Auth, Reply::Error { text, .. }) => {
                return Err(NodeOutcome::AuthFailed(text.clone()));
            }
            (Hs::Auth, _) => {}
            // NOAUTH (no password given) comes first, as INFO cluster's answer.
            (Hs::Required | Hs::Cluster | Hs::Marker, r) if refusal(r).is_some() => {
                return Err(refusal(r).expect("checked"));
            }
            (Hs::Required, Reply::Error { text, .. }) => {
                return Err(NodeOutcome::ServerError(format!(
                    "handshake failed: {text}"
                )));
            }
            (Hs::Required, _) => {}
            (Hs::Cluster, Reply::Bulk(info))
                if info_field(&String::from_utf8_lossy(info), "cluster_enabled") == Some("1") =>
            {
                return Err(NodeOutcome::ServerError(format!(
                    "{CLUSTER_UNSUPPORTED}: the node runs with cluster-enabled yes; Redlock \
                     needs independent masters"
                )));
            }
            (Hs::Cluster, _) => {}
            (Hs::Info, r) => self.observe_info(r, now),
            (Hs::Marker, r) => return Ok(self.observe_marker(r, now)),
            (Hs::MarkerProbe, r) => self.observe_probe(r),
            (Hs::MarkerWrite, Reply::Ok) => self.lock_trust().marker_present = true,
            (Hs::MarkerWrite, other) => log::warn!(
                "node {} ({}): cannot write the quarantine marker: {}",
                self.index,
                self.addr,
                other.describe()
            ),
            (Hs::Config, r) => self.observe_config(r),
        }
        Ok(Action::None)
    }

    /// Decides, from the handshake's `GET` of the marker, whether the node is trusted:
    /// the marker holds its `run_id`: trusted; an earlier `run_id`, or a restart this manager
    /// saw: quarantined from its start; none, where it had one: quarantined from now; none
    /// otherwise: undecided (the cluster-wide rule in quorum/trust.rs decides).
    fn observe_marker(&self, reply: &Reply, now: Instant) -> Action {
        let Some(run_id) = self.identity().map(|i| i.run_id) else {
            // No INFO: restarts cannot be told. observe_info warned; trust it as before.
            self.lock_trust().standing = Standing::Trusted;
            return Action::None;
        };
        let marker = match reply {
            Reply::Bulk(v) => Marker::Holds(String::from_utf8_lossy(v).into_owned()),
            Reply::Nil => Marker::Missing,
            other => {
                log::warn!(
                    "node {} ({}): cannot read the quarantine marker ({}); grants from it will \
                     fail until the marker key is readable",
                    self.index,
                    self.addr,
                    other.describe()
                );
                Marker::Unread
            }
        };
        let started = self.started_by().unwrap_or(now);
        let max_ttl = self.policy.max_ttl;
        let mut t = self.lock_trust();
        let was = t.standing;
        let (standing, action) = match &marker {
            Marker::Holds(m) if *m == run_id => {
                t.marker_present = true;
                (Standing::Trusted, Action::None)
            }
            _ if t.restarted => (
                quarantined(started + max_ttl, QuarantineReason::RestartSeen),
                Action::None,
            ),
            Marker::Holds(_) => (
                quarantined(started + max_ttl, QuarantineReason::StaleMarker),
                Action::None,
            ),
            // Reconnected to the same process, which had our marker: its keyspace was lost.
            Marker::Missing if was == Standing::Trusted && t.marker_present => {
                t.marker_present = false;
                (
                    quarantined(now + max_ttl, QuarantineReason::NoMarker),
                    Action::None,
                )
            }
            // Trusted, but our write of the marker never landed (the connection broke first):
            // no grant of this node counted without it, so writing it now is safe.
            Marker::Missing if was == Standing::Trusted => {
                (Standing::Trusted, Action::WriteMarker(run_id.clone()))
            }
            // Still quarantined or undecided from before this reconnect.
            Marker::Missing | Marker::Unread
                if matches!(
                    was,
                    Standing::Quarantined { .. } | Standing::Undecided { .. }
                ) =>
            {
                (was, Action::None)
            }
            Marker::Missing => (Standing::Undecided { since: now }, Action::None),
            Marker::Unread => (Standing::Trusted, Action::None),
        };
        if let Standing::Quarantined { reason, .. } = standing
            && was != standing
        {
            log::warn!(
                "node {} ({}) in restart quarantine: {reason}",
                self.index,
                self.addr
            );
        }
        t.standing = standing;
        t.marker = marker;
        action
    }

    /// A re-read marker: the node is trusted once it holds its `run_id` (another process
    /// ended its quarantine and wrote it).
    fn observe_probe(&self, reply: &Reply) {
        let Some(run_id) = self.identity().map(|i| i.run_id) else {
            return;
        };
        let mut t = self.lock_trust();
        if let Reply::Bulk(v) = reply
            && v == run_id.as_bytes()
        {
            t.marker_present = true;
            t.marker = Marker::Holds(run_id);
            if t.standing != Standing::Trusted {
                log::info!(
                    "node {} ({}): marker written by another process; trusted",
                    self.index,
                    self.addr
                );
                t.standing = Standing::Trusted;
            }
        }
    }

    /// A grant script answered `NOMARKER`: a trusted node whose marker was known to be there
    /// has lost its keyspace (a `FLUSHALL`, say) and is quarantined from now.
    pub(crate) fn marker_lost(&self, now: Instant) {
        let mut t = self.lock_trust();
        if t.standing == Standing::Trusted && t.marker_present {
            t.marker_present = false;
            t.marker = Marker::Missing;
            t.standing = quarantined(now + self.policy.max_ttl, QuarantineReason::NoMarker);
            log::warn!(
                "node {} ({}) lost its quarantine marker (its keyspace was flushed?): in restart \
                 quarantine for the maximum TTL",
                self.index,
                self.addr
            );
        }
    }

    /// The cluster-wide rule decided: trusted. Returns the `run_id` to write as the marker.
    pub(crate) fn make_trusted(&self) -> Option<String> {
        let mut t = self.lock_trust();
        t.standing = Standing::Trusted;
        t.next_probe = None;
        t.probe_wait = PROBE_MIN;
        drop(t);
        self.identity().map(|i| i.run_id)
    }

    /// The cluster-wide rule decided: quarantined until `until`.
    pub(crate) fn make_quarantined(&self, until: Instant, reason: QuarantineReason) {
        self.lock_trust().standing = quarantined(until, reason);
    }

    /// When this manager first saw the node's current `run_id`.
    pub(crate) fn first_seen(&self) -> Option<Instant> {
        self.lock_trust().first_seen
    }

    /// The instant a node that started at the latest possible moment leaves quarantine.
    pub(crate) fn young_until(&self, now: Instant) -> Instant {
        self.started_by().unwrap_or(now) + self.policy.max_ttl
    }

    /// The maximum TTL quarantine lasts.
    pub(crate) fn max_ttl(&self) -> Duration {
        self.policy.max_ttl
    }

    /// True when a quarantined node's marker should be read again now (with backoff: a
    /// benign race, such as another process still writing a fresh cluster's markers, then
    /// costs a fraction of a second rather than the maximum TTL).
    pub(crate) fn probe_due(&self, now: Instant) -> bool {
        let mut t = self.lock_trust();
        if !matches!(t.standing, Standing::Quarantined { .. }) {
            return false;
        }
        match t.next_probe {
            Some(at) if at > now => false,
            _ => {
                t.next_probe = Some(now + t.probe_wait);
                t.probe_wait = (t.probe_wait * 2).min(PROBE_MAX);
                true
            }
        }
    }

    /// The command that re-reads the marker.
    pub(crate) fn marker_probe_cmd() -> Vec<u8> {
        let mut c = Vec::new();
        resp::pack(&[b"GET", MARKER_KEY], &mut c);
        c
    }

    /// The command that writes the marker.
    pub(crate) fn marker_write_cmd(run_id: &str) -> Vec<u8> {
        let mut c = Vec::new();
        resp::pack(&[b"SET", MARKER_KEY, run_id.as_bytes()], &mut c);
        c
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
        let field = |name: &str| info_field(&text, name).map(str::to_string);
        let (Some(run_id), Some(uptime)) = (
            field("run_id"),
            field("uptime_in_seconds").and_then(|u| u.parse::<u64>().ok()),
        ) else {
            return;
        };
        let mut id = self.identity.lock().unwrap_or_else(|p| p.into_inner());
        let mut t = self.lock_trust();
        t.restarted = false;
        match id.as_ref() {
            Some(old) if old.run_id != run_id => {
                self.restarts.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "node {} ({}) restarted (new run_id; up for {uptime} s)",
                    self.index,
                    self.addr
                );
                t.restarted = true;
                t.first_seen = Some(now);
                t.marker_present = false;
            }
            Some(_) => {}
            None => t.first_seen = Some(now),
        }
        drop(t);
        if let Some(j) = self.peers.observe(self.index, &run_id) {
            let (a, b) = (self.index.min(j), self.index.max(j));
            log::error!(
                "nodes {a} and {b} are the same redis-server (run_id {run_id}): node {b} does not \
                 count toward any quorum; list each server once"
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

    /// What to report for the node while it waits out its reconnect backoff at `now`:
    /// `Backoff` with the last failure, or the refusal of our credentials or the TLS failure
    /// itself (so that a step during the backoff still tells a configuration problem from a
    /// dead node).
    pub(crate) fn backoff(&self, now: Instant) -> Option<NodeOutcome> {
        if self.failures.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        match (h.retry_at, &h.last_error) {
            (Some(t), Some(o @ (NodeOutcome::AuthFailed(_) | NodeOutcome::Tls(_)))) if now < t => {
                Some(o.clone())
            }
            (Some(t), last) if now < t => Some(NodeOutcome::Backoff(
                last.as_ref().map(describe).unwrap_or_default(),
            )),
            _ => None,
        }
    }

    /// Records a failure. Connection-level failures start (or lengthen) the reconnect backoff
    /// and warn once per failure streak; timeouts and error replies only count.
    pub(crate) fn record_failure(
        &self,
        now: Instant,
        what: &NodeOutcome,
        settings: &ConnSettings,
        connection: bool,
    ) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        let mut h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        h.last_error = Some(what.clone());
        let auth = matches!(what, NodeOutcome::AuthFailed(_));
        let tls = matches!(what, NodeOutcome::Tls(_));
        let what = describe(what);
        if connection {
            let shift = (n - 1).min(20);
            let wait = settings
                .backoff_min
                .saturating_mul(1u32 << shift)
                .min(settings.backoff_max);
            h.retry_at = Some(now + wait);
            if !h.warned {
                h.warned = true;
                let how = if auth {
                    "refused our credentials"
                } else if tls {
                    "failed TLS"
                } else {
                    "unreachable"
                };
                log::warn!("node {} ({}) {how}: {what}", self.index, self.addr);
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
        let refused = NodeOutcome::Unreachable("connection refused".into());
        let n = Node::bare(0);
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        n.record_failure(t0, &refused, &settings(), true);
        assert_eq!(
            n.backoff(t0),
            Some(NodeOutcome::Backoff("connection refused".into()))
        );
        assert!(n.backoff(t0 + Duration::from_millis(10)).is_none());
        n.record_failure(t0, &refused, &settings(), true);
        assert!(n.backoff(t0 + Duration::from_millis(19)).is_some());
        for _ in 0..5 {
            n.record_failure(t0, &refused, &settings(), true);
        }
        assert!(n.backoff(t0 + Duration::from_millis(40)).is_none());
        n.record_success();
        assert!(n.backoff(t0).is_none());
        // A timeout counts but does not back off.
        n.record_failure(t0, &NodeOutcome::Timeout, &settings(), false);
        assert!(n.backoff(t0).is_none());
    }

    fn info(id: &str, up: u64) -> Reply {
        Reply::Bulk(format!("# Server\r\nrun_id:{id}\r\nuptime_in_seconds:{up}\r\n").into())
    }

    fn marker(m: Option<&str>) -> Reply {
        m.map_or(Reply::Nil, |m| Reply::Bulk(m.as_bytes().to_vec()))
    }

    /// A handshake: INFO with this run_id and uptime, then the marker.
    fn handshake(n: &Node, id: &str, up: u64, m: Option<&str>, now: Instant) -> Action {
        n.on_handshake_reply(Hs::Info, &info(id, up), now).unwrap();
        n.on_handshake_reply(Hs::Marker, &marker(m), now).unwrap()
    }

    fn node() -> Node {
        Node::new(
            0,
            NodeAddr::parse("127.0.0.1:1").unwrap(),
            None,
            None,
            &[],
            QuarantinePolicy {
                enabled: true,
                max_ttl: Duration::from_secs(60),
            },
            Peers::new(1),
        )
    }

    #[test]
    fn the_marker_decides_trust_and_a_new_run_id_counts_a_restart() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        let n = node();
        assert_eq!(n.standing(), Standing::Unknown);
        // Its marker holds its run_id: trusted.
        assert_eq!(handshake(&n, "a", 5, Some("a"), t0), Action::None);
        assert_eq!(n.identity().unwrap().run_id, "a");
        assert!(n.trusted() && n.marker_seen());
        assert_eq!(n.restarts(), 0);
        // Reconnected, same process, marker gone: its keyspace was lost; quarantined from now.
        handshake(&n, "a", 50, None, t0);
        assert_eq!(
            n.quarantine(t0),
            Some((Duration::from_secs(60), QuarantineReason::NoMarker))
        );
        // A restart seen by this manager: quarantined from its start, up to 1 s rounded up:
        // up 5 s with a 60 s maximum TTL, 60 + 1 − 5 = 56 s left.
        handshake(&n, "b", 5, Some("a"), t0);
        assert_eq!(n.restarts(), 1);
        assert_eq!(
            n.quarantine(t0),
            Some((Duration::from_secs(56), QuarantineReason::RestartSeen))
        );
        // Someone else ended the quarantine and wrote the marker: a probe sees it.
        n.on_handshake_reply(Hs::MarkerProbe, &marker(Some("b")), t0)
            .unwrap();
        assert!(n.trusted());
    }

    #[test]
    fn a_new_manager_tells_stale_missing_and_lost_markers() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        // An earlier run_id in the marker: restarted from disk.
        let n = node();
        handshake(&n, "b", 5, Some("a"), t0);
        assert_eq!(
            n.quarantine(t0),
            Some((Duration::from_secs(56), QuarantineReason::StaleMarker))
        );
        // No marker at all: the cluster-wide rule decides.
        let n = node();
        handshake(&n, "c", 5, None, t0);
        assert!(matches!(n.standing(), Standing::Undecided { .. }));
        assert!(!n.marker_seen() && n.young(t0));
        // A grant answered NOMARKER on a trusted node whose marker was there: lost.
        let n = node();
        handshake(&n, "d", 500, Some("d"), t0);
        assert!(!n.young(t0));
        n.marker_lost(t0);
        assert_eq!(
            n.quarantine(t0),
            Some((Duration::from_secs(60), QuarantineReason::NoMarker))
        );
        // Trusted by the rule but our marker write never landed: no grant counted without
        // it, so the next handshake writes it again instead of quarantining.
        let n = node();
        handshake(&n, "e", 5, None, t0);
        assert_eq!(n.make_trusted().as_deref(), Some("e"));
        assert_eq!(
            handshake(&n, "e", 6, None, t0),
            Action::WriteMarker("e".into())
        );
        assert!(n.trusted());
        n.marker_lost(t0); // NOMARKER before the write landed: still trusted
        assert!(n.trusted());
    }

    #[test]
    fn handshake_errors() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        let n = node();
        let err = Reply::Error {
            code: "WRONGPASS".into(),
            text: "WRONGPASS invalid".into(),
        };
        assert!(n.on_handshake_reply(Hs::Required, &err, t0).is_err());
        assert!(n.on_handshake_reply(Hs::Info, &err, t0).is_ok());
    }

    #[test]
    fn refused_credentials_are_told_apart_during_the_backoff_too() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        let n = node();
        let err = |code: &str, text: &str| Reply::Error {
            code: code.into(),
            text: text.into(),
        };
        // Any error to AUTH (this one: a password the server does not expect).
        let no_pw = err(
            "ERR",
            "ERR AUTH <password> called without any password configured",
        );
        let refused = n.on_handshake_reply(Hs::Auth, &no_pw, t0).unwrap_err();
        assert!(matches!(&refused, NodeOutcome::AuthFailed(s) if s.starts_with("ERR AUTH")));
        // NOAUTH (no password given) reaches the first command, INFO cluster; NOPERM any.
        let noauth = err("NOAUTH", "NOAUTH Authentication required.");
        let r = n.on_handshake_reply(Hs::Cluster, &noauth, t0);
        assert_eq!(
            r,
            Err(NodeOutcome::AuthFailed(
                "NOAUTH Authentication required.".into()
            ))
        );
        let noperm = err("NOPERM", "NOPERM User bob has no permissions");
        let r = n.on_handshake_reply(Hs::Required, &noperm, t0);
        assert!(matches!(r, Err(NodeOutcome::AuthFailed(_))));
        // The backoff after it reports the refusal, not just "backoff".
        n.record_failure(t0, &refused, &settings(), true);
        assert_eq!(n.backoff(t0), Some(refused));
        n.record_success();
        assert_eq!(n.backoff(t0), None);
    }

    #[test]
    fn cluster_mode_is_refused_with_a_message_that_says_so() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        let n = node();
        let info =
            |enabled| Reply::Bulk(format!("# Cluster\r\ncluster_enabled:{enabled}\r\n").into());
        let says_cluster = |r: Result<Action, NodeOutcome>| matches!(r, Err(NodeOutcome::ServerError(s)) if s.starts_with(CLUSTER_UNSUPPORTED));
        assert!(says_cluster(n.on_handshake_reply(
            Hs::Cluster,
            &info(1),
            t0
        )));
        assert_eq!(
            n.on_handshake_reply(Hs::Cluster, &info(0), t0),
            Ok(Action::None)
        );
        // INFO renamed or refused: the check is skipped, later replies still tell.
        let unknown = Reply::Error {
            code: "ERR".into(),
            text: "ERR unknown command 'INFO'".into(),
        };
        assert_eq!(
            n.on_handshake_reply(Hs::Cluster, &unknown, t0),
            Ok(Action::None)
        );
        let moved = Reply::Error {
            code: "MOVED".into(),
            text: "MOVED 3999 127.0.0.1:6381".into(),
        };
        assert!(says_cluster(n.on_handshake_reply(Hs::Required, &moved, t0)));
        assert!(says_cluster(n.on_handshake_reply(Hs::Marker, &moved, t0)));
        let down = Reply::Error {
            code: "CLUSTERDOWN".into(),
            text: "CLUSTERDOWN Hash slot not served".into(),
        };
        match cluster_refusal(&down) {
            Some(NodeOutcome::ServerError(s)) => assert_eq!(
                s,
                "cluster mode is not supported (yet): the node answered CLUSTERDOWN Hash slot \
                 not served"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(cluster_refusal(&unknown), None);
        assert_eq!(cluster_refusal(&Reply::Ok), None);
    }
}
