//! The handshake every connection to a node starts with (`AUTH`, `INFO cluster`, `SELECT`,
//! the scripts, the scripting probe, `INFO server`, the marker, `CONFIG GET`), what each reply
//! means, the node's
//! identity (`run_id`, uptime) and the peers check that keeps one server from voting twice
//! under two addresses; and the replies that refuse us whatever was asked (credentials,
//! cluster mode).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Node;
use crate::config::NodeAddr;
use crate::error::NodeOutcome;
use crate::resp::{self, Reply};

/// What a node in Redis Cluster mode reached by a `redis://` URL is told: its keys live on
/// other nodes (it answers `MOVED`, `ASK`, `CLUSTERDOWN`, …); a cluster is one node of the
/// quorum, named by its own URL form.
pub(crate) const CLUSTER_UNSUPPORTED: &str = "a Redis Cluster node, named as a plain node: name \
     the cluster as one node, redis+cluster://host:port[,host:port...] (its seed nodes)";

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

/// The start of the outcome of a node that cannot run scripts.
pub(crate) const SCRIPTING_UNAVAILABLE: &str = "scripting unavailable on this server";

/// The start of the outcome of a node whose identity cannot be read.
pub(crate) const IDENTITY_UNKNOWN: &str = "identity unknown";

/// The probe of scripting in the handshake: its source (its `EVALSHA` uses its SHA1).
pub(crate) const SCRIPTING_PROBE: &str = "return 1";

/// What a handshake or health command is for, and so what its reply means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hs {
    /// `AUTH`: any error means the credentials were refused (`WRONGPASS`, or a password the
    /// server does not expect).
    Auth,
    /// `SELECT`, `SCRIPT LOAD`: an error makes the node unusable as configured.
    Required,
    /// `EVAL` and `EVALSHA` of a script that only returns 1: a server where either is
    /// renamed away or forbidden (some managed services restrict scripts) cannot run the
    /// scripts every release and undo needs, so it is refused at once, naming the command,
    /// rather than granting keys it can never take back.
    Scripting,
    /// `INFO cluster`: a node with `cluster_enabled:1` is refused (see
    /// [`CLUSTER_UNSUPPORTED`]); an error reply only skips the check (`INFO` renamed), and
    /// the replies to later commands still tell (see [`cluster_refusal`]).
    Cluster,
    /// `CLUSTER SHARDS`, on a shard primary of a cluster node: the slot map.
    Shards,
    /// `CLUSTER SLOTS`, right behind it: the slot map where `CLUSTER SHARDS` failed (a server
    /// before 7.0). An error from both leaves the map to the redirects.
    Slots,
    /// `INFO server`: the node's identity and age. A node that does not answer it, or answers
    /// without a `run_id`, is refused: without its identity, one server listed under two
    /// addresses would vote twice, and a restart could not be told from a running server.
    Info,
    /// `INFO replication`: the server's role and replication ids. A server that is not a
    /// master is refused (Redlock writes to masters; a failover group's sentinels may name a
    /// demoted one); a change of replication id that shows a promotion is a restart for
    /// restart quarantine (see quarantine.rs). An error reply only skips the check for a
    /// plain node (`INFO` sections restricted), and refuses a failover group's master, whose
    /// role must be confirmed.
    Replication,
    /// `GET` of the loss note ([`LOSS_NOTE_KEY`](crate::LOSS_NOTE_KEY)), in the handshake
    /// right before the marker's: whether another manager saw this server lose its keyspace.
    LossNote,
    /// `GET` of the quarantine marker, in the handshake: decides whether the node is trusted.
    Marker,
    /// `CONFIG GET appendonly|appendfsync`: an error only means the setting is unknown.
    Config,
    /// After the handshake: a re-read of the marker of a quarantined node (another process
    /// may have ended its quarantine).
    MarkerProbe,
    /// After the handshake: our write of the marker.
    MarkerWrite,
    /// Our write of the loss note, for a node this manager quarantined for a loss.
    NoteWrite,
}

/// What the link must do after a handshake or health reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    None,
    /// Write the marker with this `run_id` (before anything held behind the handshake).
    WriteMarker(String),
    /// Read this loss note and this marker as part of the handshake (a cluster node's shard,
    /// once its slot map says which slots it owns).
    ReadMarker {
        note: Vec<u8>,
        marker: Vec<u8>,
    },
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
    /// `master_replid`: the id of the replication history the server is at (`None` until
    /// `INFO replication` answered it).
    pub replid: Option<String>,
    /// `master_replid2`: the history it continued at its last promotion; `None` when all
    /// zeros (never promoted, or its backlog was reset since).
    pub replid2: Option<String>,
}

impl Identity {
    /// What the quarantine marker holds for this server: its `run_id`, and its replication
    /// id after a space when known.
    pub(crate) fn marker_value(&self) -> String {
        match &self.replid {
            Some(r) => format!("{} {r}", self.run_id),
            None => self.run_id.clone(),
        }
    }

    /// True when a marker holding `value` was written to this server as it is now (see
    /// `Node::observe_marker`): the same `run_id`, and either the same replication id or no
    /// promotion in the server's history.
    pub(crate) fn vouched_by(&self, value: &[u8]) -> bool {
        let value = String::from_utf8_lossy(value);
        let (run_id, replid) = match value.split_once(' ') {
            Some((r, p)) => (r, Some(p)),
            None => (&*value, None),
        };
        run_id == self.run_id && (replid == self.replid.as_deref() || self.replid2.is_none())
    }
}

/// The `run_id` of every node of one manager: two configured addresses that reach the same
/// server (`127.0.0.1:P`, `127.0.0.2:P`, `[::1]:P`) must never both count, or that server
/// would vote twice. Updated by every handshake, so nodes contacted late are checked too. A
/// cluster node has one `run_id` per shard primary: two URLs that reach the same cluster share
/// them, whichever seeds they name.
pub(crate) struct Peers {
    /// Per node, each server it reaches (`""` for a node's own; a shard's endpoint) with its
    /// latest `run_id`.
    run_ids: Mutex<Vec<Vec<(String, String)>>>,
    /// Per node, the lower-indexed node it duplicates (`usize::MAX`: none).
    duplicate_of: Vec<AtomicUsize>,
}

impl Peers {
    pub(crate) fn new(nodes: usize) -> Arc<Peers> {
        Arc::new(Peers {
            run_ids: Mutex::new(vec![Vec::new(); nodes]),
            duplicate_of: (0..nodes).map(|_| AtomicUsize::new(usize::MAX)).collect(),
        })
    }

    /// Node `i`'s server `server` (`""`: the node's own; a shard's endpoint) reported
    /// `run_id`; returns the node it duplicates, if it newly does.
    fn observe(&self, i: usize, server: &str, run_id: &str) -> Option<usize> {
        let mut ids = self.run_ids.lock().unwrap_or_else(|p| p.into_inner());
        match ids[i].iter_mut().find(|(s, _)| s == server) {
            Some(entry) => entry.1 = run_id.to_string(),
            None => ids[i].push((server.to_string(), run_id.to_string())),
        }
        let shares = |j: usize, k: usize| {
            (ids[k].iter()).any(|(_, r)| ids[j].iter().any(|(_, other)| other == r))
        };
        let mut new = None;
        for k in 0..ids.len() {
            let of = (0..k).find(|&j| shares(j, k));
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

    pub(super) fn duplicate_of(&self, i: usize) -> Option<usize> {
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
            (Hs::Required | Hs::Cluster | Hs::LossNote | Hs::Marker | Hs::Scripting, r)
                if refusal(r).is_some() =>
            {
                return Err(refusal(r).expect("checked"));
            }
            (Hs::Required, Reply::Error { text, .. }) => {
                return Err(NodeOutcome::ServerError(format!(
                    "handshake failed: {text}"
                )));
            }
            (Hs::Required, _) => {}
            (Hs::Scripting, Reply::Error { text, .. }) => {
                return Err(NodeOutcome::ServerError(format!(
                    "{SCRIPTING_UNAVAILABLE}: {text} (every release and undo runs a Lua script \
                     with EVAL and EVALSHA)"
                )));
            }
            (Hs::Scripting, _) => {}
            (Hs::Cluster, Reply::Bulk(info))
                if info_field(&String::from_utf8_lossy(info), "cluster_enabled") == Some("1") =>
            {
                return Err(NodeOutcome::ServerError(format!(
                    "{CLUSTER_UNSUPPORTED}: the node runs with cluster-enabled yes"
                )));
            }
            (Hs::Cluster, _) => {}
            (Hs::Shards | Hs::Slots, r) if auth_refusal(r).is_some() => {
                return Err(auth_refusal(r).expect("checked"));
            }
            (Hs::Shards, r) => return Ok(self.observe_shards(r, false)),
            (Hs::Slots, r) => return Ok(self.observe_shards(r, true)),
            (Hs::Info, r) => self.observe_info(r, now)?,
            (Hs::Replication, r) if refusal(r).is_some() => {
                return Err(refusal(r).expect("checked"));
            }
            (Hs::Replication, r) => self.observe_replication(r, now)?,
            (Hs::LossNote, r) => self.observe_loss_note(r),
            (Hs::Marker, r) => return Ok(self.observe_marker(r, now)),
            (Hs::MarkerProbe, r) => self.observe_probe(r),
            (Hs::MarkerWrite, Reply::Ok) => self.lock_trust().marker_present = true,
            (Hs::MarkerWrite, other) => log::warn!(
                "node {} ({}): cannot write the quarantine marker: {}",
                self.index,
                self.addr,
                other.describe()
            ),
            (Hs::NoteWrite, Reply::Ok) => {}
            (Hs::NoteWrite, other) => log::warn!(
                "node {} ({}): cannot write the loss note: {}",
                self.index,
                self.addr,
                other.describe()
            ),
            (Hs::Config, r) => self.observe_config(r),
        }
        Ok(Action::None)
    }

    /// Loads a shard's `CLUSTER SHARDS` answer into its cluster's slot map, or its
    /// `CLUSTER SLOTS` answer (`slots`) where the first failed. With restart quarantine, the
    /// marker of the lowest slot the shard owns is then read as part of the handshake.
    fn observe_shards(&self, reply: &Reply, slots: bool) -> Action {
        use std::sync::atomic::Ordering;
        let Some(shard) = &self.shard else {
            return Action::None;
        };
        let host = &shard.endpoint.host;
        if slots && !shard.no_shards.load(Ordering::Relaxed) {
            return Action::None;
        }
        let read = if slots {
            super::slots::parse_slots(reply, host)
        } else {
            super::slots::parse_shards(reply, self.addr.is_tls(), host)
        };
        match read {
            Ok(shards) => {
                shard.no_shards.store(false, Ordering::Relaxed);
                let mut m = shard.map.lock().unwrap_or_else(|p| p.into_inner());
                m.load(&shards);
            }
            Err(_) if !slots => {
                shard.no_shards.store(true, Ordering::Relaxed);
                return Action::None;
            }
            Err(e) => log::warn!(
                "node {} ({}): cannot read the slot map ({e}); following redirects instead",
                self.index,
                shard.endpoint
            ),
        }
        match (self.policy.enabled || self.policy.durable, shard.home()) {
            (true, Some(home)) => Action::ReadMarker {
                note: crate::config::slot_loss_note(home),
                marker: crate::config::slot_marker(home),
            },
            _ => Action::None,
        }
    }

    /// Reads `run_id` and `uptime_in_seconds` from an `INFO server` reply; `Err` when they
    /// are not there (see [`Hs::Info`]).
    fn observe_info(&self, reply: &Reply, now: Instant) -> Result<(), NodeOutcome> {
        let unknown = |what: String| {
            NodeOutcome::ServerError(format!(
                "{IDENTITY_UNKNOWN}: {what}; its run_id (INFO server) tells one server from \
                 another, so that none votes twice under two addresses, and a restart from a \
                 running server: allow INFO on this server"
            ))
        };
        let text = match reply {
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            Reply::Error { text, .. } => return Err(unknown(format!("INFO failed ({text})"))),
            other => {
                let what = format!("INFO answered {}", other.describe());
                return Err(unknown(what));
            }
        };
        let field = |name: &str| info_field(&text, name).map(str::to_string);
        let (Some(run_id), Some(uptime)) = (
            field("run_id"),
            field("uptime_in_seconds").and_then(|u| u.parse::<u64>().ok()),
        ) else {
            return Err(unknown(
                "INFO server has no run_id or uptime_in_seconds".into(),
            ));
        };
        let mut id = self.identity.lock().unwrap_or_else(|p| p.into_inner());
        let mut t = self.lock_trust();
        t.restarted = false;
        t.promoted = false;
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
        let server = self.shard.as_ref().map(|s| s.endpoint.to_string());
        if let Some(j) = (self.peers).observe(self.index, server.as_deref().unwrap_or(""), &run_id)
        {
            let (a, b) = (self.index.min(j), self.index.max(j));
            log::error!(
                "nodes {a} and {b} are the same redis-server (run_id {run_id}): node {b} does not \
                 count toward any quorum; list each server once"
            );
        }
        // The replication ids carry over while the server is the same (compared by
        // observe_replication).
        let (replid, replid2) = match id.take() {
            Some(old) if old.run_id == run_id => (old.replid, old.replid2),
            _ => (None, None),
        };
        *id = Some(Identity {
            run_id,
            uptime: Duration::from_secs(uptime),
            seen_at: now,
            replid,
            replid2,
        });
        Ok(())
    }

    /// Reads an `INFO replication` reply: refuses a server that is not a master, records its
    /// replication ids, and notes a promotion (see [`Hs::Replication`]).
    fn observe_replication(&self, reply: &Reply, now: Instant) -> Result<(), NodeOutcome> {
        let text = match reply {
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => {
                return match &self.group {
                    Some(g) => Err(NodeOutcome::Sentinel(format!(
                        "cannot confirm that {} is the master of {:?}: INFO replication                          answered {}",
                        self.master().map(|a| a.to_string()).unwrap_or_default(),
                        g.service,
                        other.describe()
                    ))),
                    None => Ok(()),
                };
            }
        };
        let role = info_field(&text, "role").unwrap_or("unknown");
        if role != "master" {
            return Err(match &self.group {
                Some(g) => NodeOutcome::Sentinel(format!(
                    "the sentinels name {} as the master of {:?}, but it says role:{role} (a                      failover in progress?); the sentinels are asked again at the next connection",
                    self.master().map(|a| a.to_string()).unwrap_or_default(),
                    g.service
                )),
                None => NodeOutcome::ServerError(format!(
                    "the server is not a master (role:{role}): Redlock writes to masters; list                      the master, or its failover group as redis+sentinel://"
                )),
            });
        }
        let replid = info_field(&text, "master_replid").map(str::to_string);
        let replid2 = info_field(&text, "master_replid2")
            .filter(|r| !r.bytes().all(|b| b == b'0'))
            .map(str::to_string);
        let mut id = self.identity.lock().unwrap_or_else(|p| p.into_inner());
        let Some(id) = id.as_mut() else {
            return Ok(()); // INFO server failed first, and refused the node
        };
        let promoted = replid2.is_some() && id.replid.is_some() && id.replid != replid;
        if promoted {
            self.promotions.fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "node {} ({}) was promoted (its replication id changed, continuing another                  history): it may lack its old master's last writes",
                self.index,
                self.addr
            );
            let mut t = self.lock_trust();
            t.promoted = true;
            t.first_seen = Some(now);
            t.marker_present = false;
        }
        id.replid = replid;
        id.replid2 = replid2;
        Ok(())
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
}
