//! What a client knows of one node beyond its connection: its address, the handshake its
//! connections start with, its identity (`run_id`, uptime), restarts seen, restart
//! quarantine, and the reconnect backoff after failures.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::{LOSS_NOTE_KEY, Lookups, MARKER_KEY, NodeAddr, Resolver};
use crate::error::NodeOutcome;
use crate::resp;
use crate::timing::RttEstimate;
use crate::tls;

mod handshake;
mod quarantine;
mod sentinel;
mod slots;

pub(crate) use handshake::{Action, Hs, Identity, Peers, auth_and_select, auth_refusal, refusal};
use quarantine::{Marker, PROBE_MIN, Trust};
pub(crate) use quarantine::{QuarantinePolicy, Standing};
pub(crate) use sentinel::{Ask, Discovery, Group, Next};
pub(crate) use slots::{Endpoint, Redirect, SlotMap, redirect};

/// A failure as the node's health records it: the outcome's text.
pub(crate) fn describe(o: &NodeOutcome) -> String {
    match o {
        NodeOutcome::Unreachable(s)
        | NodeOutcome::Protocol(s)
        | NodeOutcome::Tls(s)
        | NodeOutcome::Sentinel(s)
        | NodeOutcome::ServerError(s)
        | NodeOutcome::AuthFailed(s) => s.clone(),
        NodeOutcome::Timeout => "timeout".into(),
        other => format!("{other:?}"),
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

/// Replica acknowledgement of a failover group's grants (see
/// [`Config::replica_acks`](crate::Config::replica_acks)): the `WAIT` written behind each grant,
/// and what it must count for the grant to count.
pub(crate) struct Ack {
    pub replicas: u32,
    pub timeout: Duration,
    /// `WAIT replicas timeout-ms`.
    pub cmd: Vec<u8>,
}

impl Ack {
    pub(crate) fn new(replicas: u32, timeout: Duration) -> Ack {
        let mut cmd = Vec::new();
        resp::pack(
            &[
                b"WAIT",
                replicas.to_string().as_bytes(),
                timeout.as_millis().to_string().as_bytes(),
            ],
            &mut cmd,
        );
        Ack {
            replicas,
            timeout,
            cmd,
        }
    }

    /// True when a `WAIT` that counted `acks` replicas is enough.
    pub(crate) fn enough(&self, acks: Option<u64>) -> bool {
        acks.is_some_and(|n| n >= u64::from(self.replicas))
    }
}

/// A configured node and its shared state.
pub(crate) struct Node {
    pub index: usize,
    pub addr: NodeAddr,
    /// `addr` as text, passwords redacted (reports copy it rather than format it each time).
    pub addr_text: String,
    /// For a failover group: its sentinels, asked for the master at every new connection.
    pub group: Option<Group>,
    /// For a failover group whose grants must be acknowledged by replicas: how.
    pub ack: Option<Ack>,
    /// For one shard primary of a cluster node: the node's slot map (shared by its shards,
    /// reloaded by each shard's handshake) and this primary's address in it.
    pub shard: Option<ShardOf>,
    /// The address as last found: a plain node's (resolved when the manager was made, or what
    /// its host name resolved to last), or the master its sentinels named last; shared with
    /// the node's subscriber connection.
    pub master_addr: Arc<Mutex<Option<SocketAddr>>>,
    /// For a failover group: the name its sentinels gave the master (an address or a host
    /// name), which a TLS connection to the master is verified against.
    pub master_name: Arc<Mutex<Option<String>>>,
    /// For a plain node or shard named by a host name: its look-ups at each reconnection.
    lookups: Option<Lookups>,
    /// Whether a connection was tried yet (the first uses the address resolved at start).
    dialed: AtomicBool,
    /// Promotions seen: the replication id of the server changed, or it reports a history
    /// its marker does not know.
    promotions: AtomicU64,
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

/// What a shard primary of a cluster node knows of its cluster.
pub(crate) struct ShardOf {
    pub map: Arc<Mutex<SlotMap>>,
    pub endpoint: Endpoint,
    /// The last `CLUSTER SHARDS` failed (a server before 7.0): `CLUSTER SLOTS` is read.
    pub no_shards: std::sync::atomic::AtomicBool,
}

impl ShardOf {
    /// The slots this primary owns, as the map says now.
    pub(crate) fn owned(&self) -> Vec<u16> {
        let m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        m.slots_of(&self.endpoint)
    }

    /// The lowest slot this primary owns: its marker is the shard's identity marker.
    pub(crate) fn home(&self) -> Option<u16> {
        self.owned().first().copied()
    }
}

/// The handshake a node's address and the manager's settings ask for, and what each reply
/// is for (see [`Node::new`]). A shard primary of a cluster node asks for the slot map where
/// any other node asks whether it is in cluster mode.
fn handshake_commands(
    addr: &NodeAddr,
    scripts: &[&str],
    policy: QuarantinePolicy,
    shard: bool,
) -> (Vec<u8>, Vec<Hs>) {
    let mut handshake = Vec::new();
    let mut kinds = Vec::new();
    if let Some(pw) = addr.password() {
        match addr.username() {
            Some(user) => resp::pack(&[b"AUTH", user.as_bytes(), pw.as_bytes()], &mut handshake),
            None => resp::pack(&[b"AUTH", pw.as_bytes()], &mut handshake),
        }
        kinds.push(Hs::Auth);
    }
    if shard {
        // CLUSTER SLOTS for servers without CLUSTER SHARDS (before 7.0).
        resp::pack(&[b"CLUSTER", b"SHARDS"], &mut handshake);
        resp::pack(&[b"CLUSTER", b"SLOTS"], &mut handshake);
        kinds.extend([Hs::Shards, Hs::Slots]);
    } else {
        // Before SELECT, which a cluster node refuses with a message that does not say why.
        resp::pack(&[b"INFO", b"cluster"], &mut handshake);
        kinds.push(Hs::Cluster);
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
    // EVAL caches the probe, so the EVALSHA behind it finds it.
    let probe_sha = resp::script_sha(handshake::SCRIPTING_PROBE);
    resp::pack(
        &[b"EVAL", handshake::SCRIPTING_PROBE.as_bytes(), b"0"],
        &mut handshake,
    );
    resp::pack(&[b"EVALSHA", probe_sha.as_bytes(), b"0"], &mut handshake);
    kinds.extend([Hs::Scripting, Hs::Scripting]);
    resp::pack(&[b"INFO", b"server"], &mut handshake);
    kinds.push(Hs::Info);
    // Its role (a replica is refused) and replication history (a promotion is a restart).
    resp::pack(&[b"INFO", b"replication"], &mut handshake);
    kinds.push(Hs::Replication);
    if policy.enabled || policy.durable {
        // A shard reads the marker of a slot it owns once its slot map says which.
        if !shard {
            resp::pack(&[b"GET", LOSS_NOTE_KEY], &mut handshake);
            resp::pack(&[b"GET", MARKER_KEY], &mut handshake);
            kinds.extend([Hs::LossNote, Hs::Marker]);
        }
    } else {
        for setting in [&b"appendonly"[..], b"appendfsync"] {
            resp::pack(&[b"CONFIG", b"GET", setting], &mut handshake);
            kinds.push(Hs::Config);
        }
    }
    (handshake, kinds)
}

impl Node {
    /// A node reached at `sockaddr`, with the handshake its address asks for (`AUTH`, then
    /// `INFO cluster`, which refuses a node in cluster mode, then `SELECT`) followed by
    /// `SCRIPT LOAD` of every script, `EVAL` and `EVALSHA` of a script that returns 1 (a server
    /// that cannot run scripts is refused), and `INFO server` (identity and uptime, for
    /// restart detection). With quarantine off, it also reads `appendonly` and
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
        let (handshake, kinds) = handshake_commands(&addr, scripts, policy, false);
        Node {
            index,
            addr_text: addr.to_string(),
            addr,
            group: None,
            ack: None,
            shard: None,
            master_addr: Arc::new(Mutex::new(sockaddr)),
            master_name: Arc::new(Mutex::new(None)),
            lookups: None,
            dialed: AtomicBool::new(false),
            promotions: AtomicU64::new(0),
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
                promoted: false,
                first_seen: None,
                next_probe: None,
                probe_wait: PROBE_MIN,
                note: false,
                note_written: None,
                lost_seen: false,
            }),
            restarts: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            rtt: RttEstimate::default(),
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
                durable: false,
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

    /// Makes the node one shard primary of a cluster node: its handshake reads the cluster's
    /// slot map into `shard.map` (and does not refuse cluster mode).
    pub(crate) fn set_shard(&mut self, shard: ShardOf, scripts: &[&str]) {
        let (handshake, kinds) = handshake_commands(&self.addr, scripts, self.policy, true);
        self.handshake = handshake;
        self.handshake_kinds = kinds;
        self.shard = Some(shard);
    }

    /// Makes the node a failover group: its master is found by asking `group`'s sentinels;
    /// with `ack`, its grants count only once that many replicas acknowledged them.
    pub(crate) fn set_group(&mut self, group: Group, ack: Option<Ack>) {
        self.ack = ack;
        self.group = Some(group);
        *self.master_addr.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// A node named by a host name looks the name up again (through `resolver`) for every
    /// connection after the first, so that a name that moves (a managed endpoint's, after a
    /// failover) is followed. Nothing for an IP address.
    pub(crate) fn look_up_again(&mut self, resolver: &Resolver) {
        if self.addr.host_is_name() {
            self.lookups = Some(Lookups::with(resolver.clone()));
        }
    }

    /// Where a new connection to a plain node goes: after the first, what its host name
    /// resolves to by `by` (at most; a look-up that takes longer goes on for the next
    /// connection), or else the last address known.
    pub(crate) fn address(&self, by: Instant) -> Option<SocketAddr> {
        let last = self.master();
        let again = self.dialed.swap(true, Ordering::Relaxed);
        let Some(l) = self.lookups.as_ref().filter(|_| again) else {
            return last;
        };
        let last = last?;
        let a = l.refresh(self.addr.host(), self.addr.port(), by, last);
        if a != last {
            *self.master_addr.lock().unwrap_or_else(|p| p.into_inner()) = Some(a);
        }
        Some(a)
    }

    /// The master's address: a plain node's, or the one its sentinels named last.
    pub(crate) fn master(&self) -> Option<SocketAddr> {
        *self.master_addr.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sentinels named `name`, which resolved to `addr`, as the group's master.
    pub(crate) fn set_master(&self, addr: SocketAddr, name: &str) {
        *self.master_name.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.to_string());
        let mut m = self.master_addr.lock().unwrap_or_else(|p| p.into_inner());
        if m.is_some_and(|old| old != addr) {
            log::warn!(
                "node {} ({}): the sentinels now name {addr} as the master (was {})",
                self.index,
                self.addr,
                m.expect("checked")
            );
        }
        *m = Some(addr);
    }

    /// Promotions seen so far (see [`QuarantineReason::Promoted`](crate::QuarantineReason)).
    pub(crate) fn promotions(&self) -> u64 {
        self.promotions.load(Ordering::Relaxed)
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

    /// The lower-indexed node this one reaches the same server as, if any: it then counts in
    /// no round.
    pub(crate) fn duplicate_of(&self) -> Option<usize> {
        self.peers.duplicate_of(self.index)
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

    /// True during a failure streak (the last attempt to reach it failed).
    pub(crate) fn failing(&self) -> bool {
        self.failures.load(Ordering::Relaxed) > 0
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
    use super::handshake::*;
    use super::quarantine::*;
    use super::*;
    use crate::error::QuarantineReason;
    use crate::resp::Reply;

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
                durable: false,
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
        // A restart seen by this manager: quarantined from when it saw it, not from the
        // server's start (up 500 s: a promoted replica behind the same address, say).
        handshake(&n, "b", 500, Some("a"), t0);
        assert_eq!(n.restarts(), 1);
        assert_eq!(
            n.quarantine(t0),
            Some((Duration::from_secs(60), QuarantineReason::RestartSeen))
        );
        // Someone else ended the quarantine and wrote the marker: a probe sees it.
        n.on_handshake_reply(Hs::MarkerProbe, &marker(Some("b")), t0)
            .unwrap();
        assert!(n.trusted());
    }

    #[test]
    fn a_new_manager_tells_stale_missing_and_lost_markers() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        // Another run_id in the marker: restarted from disk, or a promoted replica holding
        // its old master's marker. Quarantined from now, however long it has been up.
        for up in [5, 5_000] {
            let n = node();
            handshake(&n, "b", up, Some("a"), t0);
            assert_eq!(
                n.quarantine(t0),
                Some((Duration::from_secs(60), QuarantineReason::StaleMarker))
            );
        }
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

    fn replication(role: &str, replid: &str, replid2: &str) -> Reply {
        Reply::Bulk(
            format!(
                "# Replication\r\nrole:{role}\r\nmaster_replid:{replid}\r\n\
                 master_replid2:{replid2}\r\n"
            )
            .into(),
        )
    }

    const ZEROS: &str = "0000000000000000000000000000000000000000";

    /// A handshake with INFO replication between INFO server and the marker.
    fn handshake_with(n: &Node, id: &str, repl: (&str, &str), m: Option<&str>, now: Instant) {
        n.on_handshake_reply(Hs::Info, &info(id, 5_000), now)
            .unwrap();
        n.on_handshake_reply(Hs::Replication, &replication("master", repl.0, repl.1), now)
            .unwrap();
        n.on_handshake_reply(Hs::Marker, &marker(m), now).unwrap();
    }

    #[test]
    fn a_promotion_the_marker_does_not_know_is_quarantined_from_when_it_is_seen() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        let promoted = Some((Duration::from_secs(60), QuarantineReason::Promoted));
        // The marker records the run_id and the replication id it was written under.
        let n = node();
        handshake_with(&n, "a", ("r1", ZEROS), None, t0);
        assert_eq!(n.make_trusted().as_deref(), Some("a r1"));
        // The same process, demoted and promoted again: same run_id, a new replication id
        // continuing another history, and its own old marker replicated back.
        let n = node();
        handshake_with(&n, "a", ("r3", "rx"), Some("a r1"), t0);
        assert_eq!(n.quarantine(t0), promoted);
        // ... and with a marker from an older version of the library (run_id alone).
        let n = node();
        handshake_with(&n, "a", ("r3", "rx"), Some("a"), t0);
        assert_eq!(n.quarantine(t0), promoted);
        // No promotion in its history (replid2 empty: the id changed when its backlog was
        // created or freed): the run_id vouches, in either format.
        for m in ["a r1", "a"] {
            let n = node();
            handshake_with(&n, "a", ("r2", ZEROS), Some(m), t0);
            assert!(n.trusted(), "{m}");
        }
        // Exactly the marker's history: trusted.
        let n = node();
        handshake_with(&n, "a", ("r3", "rx"), Some("a r3"), t0);
        assert!(n.trusted());
        // Seen by this manager: the replication id changed to a promoted history.
        handshake_with(&n, "a", ("r4", "r3"), Some("a r3"), t0);
        assert_eq!(n.quarantine(t0), promoted);
        assert_eq!(n.promotions(), 1);
        // A probe of a marker another process wrote for the new history ends it.
        n.on_handshake_reply(Hs::MarkerProbe, &marker(Some("a r4")), t0)
            .unwrap();
        assert!(n.trusted());
        // A backlog reset seen by this manager is not a promotion.
        handshake_with(&n, "a", ("r5", ZEROS), Some("a r4"), t0);
        assert!(n.trusted());
        assert_eq!(n.promotions(), 1);
    }

    #[test]
    fn a_replica_is_refused() {
        let t0 = crate::timing::Clock::now(&crate::timing::SystemClock);
        let n = node();
        n.on_handshake_reply(Hs::Info, &info("a", 5), t0).unwrap();
        let r = n.on_handshake_reply(Hs::Replication, &replication("slave", "r", ZEROS), t0);
        assert!(
            matches!(&r, Err(NodeOutcome::ServerError(s)) if s.contains("role:slave")),
            "{r:?}"
        );
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
        // No identity: refused, saying why.
        let no_info = Reply::Error {
            code: "ERR".into(),
            text: "ERR unknown command 'INFO'".into(),
        };
        let r = n.on_handshake_reply(Hs::Info, &no_info, t0);
        assert!(
            matches!(&r, Err(NodeOutcome::ServerError(s)) if s.starts_with("identity unknown")),
            "{r:?}"
        );
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
                format!(
                    "{CLUSTER_UNSUPPORTED}: the node answered CLUSTERDOWN Hash slot not served"
                )
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(cluster_refusal(&unknown), None);
        assert_eq!(cluster_refusal(&Reply::Ok), None);
    }
}
