//! Restart quarantine of one node: its standing (unknown, trusted, undecided, quarantined),
//! what its marker held when last read, when it is read again, and the rules that decide from
//! them whether the node's grants count (the argument is in docs/operations.md,
//! "Restart quarantine").

use std::time::{Duration, Instant};

use super::{Action, Node};
use crate::config::{LOSS_NOTE_KEY, MARKER_KEY};
use crate::error::QuarantineReason;
use crate::resp::{self, Reply};

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
pub(super) enum Marker {
    /// Not read (or unreadable).
    Unread,
    Missing,
    /// Some value: the `run_id` (and replication id) of the current server or of another.
    Holds(String),
}

/// The trust state of one node.
pub(super) struct Trust {
    pub(super) standing: Standing,
    /// The marker as of the last handshake or probe.
    pub(super) marker: Marker,
    /// The marker is known to hold the current `run_id` (read back, or our write confirmed).
    pub(super) marker_present: bool,
    /// The `run_id` changed at the last handshake.
    pub(super) restarted: bool,
    /// The replication id changed at the last handshake, continuing another history (a
    /// promotion).
    pub(super) promoted: bool,
    /// When this manager first saw the current `run_id`.
    pub(super) first_seen: Option<Instant>,
    /// When a quarantined node's marker is read again next, and the wait after that.
    pub(super) next_probe: Option<Instant>,
    pub(super) probe_wait: Duration,
    /// The last handshake found a loss note ([`LOSS_NOTE_KEY`]): another manager saw this
    /// server lose its keyspace.
    pub(super) note: bool,
    /// The `run_id` this manager last wrote a loss note for.
    pub(super) note_written: Option<String>,
    /// This manager saw the node lose its keyspace without a restart (its marker vanished
    /// under it): its `NoMarker` quarantine is a loss, not a server that may be new.
    pub(super) lost_seen: bool,
}

/// The first and the longest wait between two reads of a quarantined node's marker.
pub(super) const PROBE_MIN: Duration = Duration::from_millis(10);

const PROBE_MAX: Duration = Duration::from_secs(1);

fn quarantined(until: Instant, reason: QuarantineReason) -> Standing {
    Standing::Quarantined { until, reason }
}

/// Restart quarantine's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuarantinePolicy {
    /// Quarantine applies to this node (off for a node marked durable).
    pub enabled: bool,
    pub max_ttl: Duration,
    /// The node is marked durable while the cluster uses quarantine: its grants must still
    /// find a marker (other nodes' rules and other managers read it), so its handshake reads
    /// the marker and writes it when it does not vouch for the server, but never quarantines.
    pub durable: bool,
}

impl Node {
    pub(super) fn lock_trust(&self) -> std::sync::MutexGuard<'_, Trust> {
        self.trust.lock().unwrap_or_else(|p| p.into_inner())
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
    /// A loss note counts too: the cluster met this library, and this node lost its keyspace.
    pub(crate) fn marker_seen(&self) -> bool {
        let t = self.lock_trust();
        t.marker_present || t.note || matches!(t.marker, Marker::Holds(_))
    }

    /// True when the last handshake found a loss note: another manager saw this server lose
    /// its keyspace, so it is not new.
    pub(crate) fn loss_noted(&self) -> bool {
        self.lock_trust().note
    }

    /// The handshake's `GET` of the loss note, read right before the marker's.
    pub(super) fn observe_loss_note(&self, reply: &Reply) {
        self.lock_trust().note = matches!(reply, Reply::Bulk(_));
    }

    /// Decides, from the handshake's `GET` of the marker, whether the node is trusted:
    /// the marker vouches for the server as it is now (see below): trusted; a restart or a
    /// promotion this manager saw, another `run_id`, or the same `run_id` with a promotion the
    /// marker does not know: quarantined from when this manager first saw the node so; none,
    /// where it had one: quarantined from now; none otherwise: undecided (the cluster-wide
    /// rule in quorum/trust.rs decides).
    ///
    /// Why not from the server's start: a marker that holds another `run_id` was either
    /// written to this server before it restarted from disk, or *replicated* to it from
    /// another server (a replica promoted after a failover, or an address that now leads to
    /// another server). A promoted replica may lack the last writes of the master it
    /// replaced, lost at the promotion, which may be long after the replica started: its
    /// uptime bounds nothing. No client can tell when the promotion happened, but it happened
    /// before this manager first saw the server with that marker (or, for a restart seen on a
    /// reconnect, before the reconnect), so a maximum TTL from then covers every lock it may
    /// have lost. A replicated marker never holds the promoted server's own `run_id` (a replica
    /// takes its master's keyspace), so it never ends the quarantine early; the marker is
    /// rewritten only once the quarantine is over.
    ///
    /// What the marker records, and why: the `run_id` and the replication id
    /// (`master_replid`) of the server it was written to ([`Identity::marker_value`](super::Identity::marker_value)). The
    /// `run_id` alone misses one case: a master that was demoted, took its new master's
    /// keyspace (and with it a marker holding *its own* `run_id`, replicated back from before
    /// the first failover) and was promoted again, still the same process, without the last
    /// writes of the master it replaced. Redis gives a master a new replication id at every
    /// promotion, and keeps the history it continued as `master_replid2`; it also changes the
    /// id, clearing `master_replid2`, when its backlog is created or freed (a first replica
    /// attaching, or none for `repl-backlog-ttl`). So a marker vouches for the server
    /// ([`Identity::vouched_by`](super::Identity::vouched_by)) when its `run_id` matches and either its replication id
    /// matches too, or `master_replid2` is empty: the server has no promotion in its history
    /// since its last backlog reset, which comes at least `repl-backlog-ttl` (3600 s by
    /// default) after any promotion, so a promotion hidden by a reset is older than any lock
    /// (this needs the maximum TTL at most `repl-backlog-ttl`). A marker written by an older
    /// version of this library (the `run_id` alone) is read the same way.
    pub(super) fn observe_marker(&self, reply: &Reply, now: Instant) -> Action {
        let Some(id) = self.identity() else {
            // No identity: the handshake has already failed at INFO (observe_info), so this
            // is not reached; should it be, the node's standing stays as it is (never trusted
            // without an identity).
            return Action::None;
        };
        let marker = self.read_marker(reply);
        if self.policy.durable {
            return self.durable_marker(&marker, &id);
        }
        let max_ttl = self.policy.max_ttl;
        let migrated = self.shard.is_some() && id.replid2.is_none() && !self.young(now);
        let mut t = self.lock_trust();
        let was = t.standing;
        // When this manager first saw the server as it is now (set by the handshake's INFO).
        let seen = t.first_seen.unwrap_or(now);
        let (standing, action) = match &marker {
            Marker::Holds(m) if !t.restarted && !t.promoted && id.vouched_by(m.as_bytes()) => {
                t.marker_present = true;
                (Standing::Trusted, Action::None)
            }
            _ if t.restarted => (
                quarantined(seen + max_ttl, QuarantineReason::RestartSeen),
                Action::None,
            ),
            _ if t.promoted => (
                quarantined(seen + max_ttl, QuarantineReason::Promoted),
                Action::None,
            ),
            // Its own run_id, but a promotion the marker does not know of.
            Marker::Holds(m) if m.split(' ').next() == Some(id.run_id.as_str()) => (
                quarantined(seen + max_ttl, QuarantineReason::Promoted),
                Action::None,
            ),
            // A cluster node's shard whose server has no promotion in its history and is
            // older than the maximum TTL: the marker came with a slot moved to it by
            // resharding (or from a restart older than any lock), not by replication.
            Marker::Holds(_) if migrated => {
                (Standing::Trusted, Action::WriteMarker(id.marker_value()))
            }
            Marker::Holds(_) => (
                quarantined(seen + max_ttl, QuarantineReason::StaleMarker),
                Action::None,
            ),
            // Reconnected to the same process, which had our marker, or with another manager's
            // loss note (elsewhere the note counts in the cluster-wide rule: `marker_seen`): its
            // keyspace was lost after this manager trusted it.
            Marker::Missing if was == Standing::Trusted && (t.marker_present || t.note) => {
                t.marker_present = false;
                t.lost_seen = true;
                (
                    quarantined(now + max_ttl, QuarantineReason::NoMarker),
                    Action::None,
                )
            }
            // Trusted, but our write of the marker never landed (the connection broke first):
            // no grant of this node counted without it, so writing it now is safe.
            Marker::Missing if was == Standing::Trusted => {
                (Standing::Trusted, Action::WriteMarker(id.marker_value()))
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
        self.warn_quarantined(was, standing);
        t.standing = standing;
        t.marker = marker;
        action
    }

    /// Warns when the node enters restart quarantine (from another standing).
    fn warn_quarantined(&self, was: Standing, now: Standing) {
        if let Standing::Quarantined { reason, .. } = now
            && was != now
        {
            let (i, a) = (self.index, &self.addr);
            log::warn!("node {i} ({a}) in restart quarantine: {reason}");
        }
    }

    /// A durable node is trusted whatever happened (it keeps every write): its marker is
    /// written when it does not vouch for the server, for the grant scripts and for managers
    /// that do not know the node is durable.
    fn durable_marker(&self, marker: &Marker, id: &super::Identity) -> Action {
        match marker {
            Marker::Holds(m) if id.vouched_by(m.as_bytes()) => {
                self.lock_trust().marker_present = true;
                Action::None
            }
            _ => Action::WriteMarker(id.marker_value()),
        }
    }

    /// The marker as the handshake's `GET` read it.
    fn read_marker(&self, reply: &Reply) -> Marker {
        match reply {
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
        }
    }

    /// A re-read marker: the node is trusted once the marker vouches for it (another
    /// process ended its quarantine and wrote it).
    pub(crate) fn observe_probe(&self, reply: &Reply) {
        let Some(id) = self.identity() else {
            return;
        };
        let mut t = self.lock_trust();
        if let Reply::Bulk(v) = reply
            && id.vouched_by(v)
        {
            t.marker_present = true;
            t.marker = Marker::Holds(String::from_utf8_lossy(v).into_owned());
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
    /// has lost its keyspace (a `FLUSHALL`, say) and is quarantined from now. A durable node
    /// is not: the marker to write back is returned instead.
    pub(crate) fn marker_lost(&self, now: Instant) -> Option<String> {
        if self.policy.durable {
            self.lock_trust().marker_present = false;
            return self.identity().map(|i| i.marker_value());
        }
        let mut t = self.lock_trust();
        if t.standing == Standing::Trusted && t.marker_present {
            t.marker_present = false;
            t.lost_seen = true;
            t.marker = Marker::Missing;
            t.standing = quarantined(now + self.policy.max_ttl, QuarantineReason::NoMarker);
            log::warn!(
                "node {} ({}) lost its quarantine marker (its keyspace was flushed?): in restart \
                 quarantine for the maximum TTL",
                self.index,
                self.addr
            );
        }
        None
    }

    /// The cluster-wide rule decided: trusted. Returns the value to write as the marker.
    pub(crate) fn make_trusted(&self) -> Option<String> {
        let mut t = self.lock_trust();
        t.standing = Standing::Trusted;
        t.lost_seen = false;
        t.note_written = None;
        t.next_probe = None;
        t.probe_wait = PROBE_MIN;
        drop(t);
        self.identity().map(|i| i.marker_value())
    }

    /// True once this manager has confirmed the node holds its current marker (read in the
    /// handshake, or written by this manager and acknowledged).
    pub(crate) fn marker_present(&self) -> bool {
        self.lock_trust().marker_present
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

    /// The command that re-reads the marker: [`MARKER_KEY`], or on a cluster node's shard
    /// the marker of the lowest slot it owns (`None` when it owns none).
    pub(crate) fn marker_probe_cmd(&self) -> Option<Vec<u8>> {
        let key = match &self.shard {
            Some(s) => crate::config::slot_marker(s.home()?),
            None => MARKER_KEY.to_vec(),
        };
        let mut c = Vec::new();
        resp::pack(&[b"GET", &key], &mut c);
        Some(c)
    }

    /// The command that writes this node's loss note ([`LOSS_NOTE_KEY`]), when this manager
    /// has it in quarantine for a loss (a restart, a flush, a promotion, a stale marker, or
    /// another manager's note) and has not written one for this server yet: `SET` with the
    /// lost server's `run_id` and why, expiring after two maximum TTLs (at least the maximum
    /// TTL and 2 s: a node counts as young for up to a second past the maximum TTL).
    pub(crate) fn loss_note_cmd(&self) -> Option<Vec<u8>> {
        let Standing::Quarantined { reason, .. } = self.standing() else {
            return None;
        };
        if matches!(
            reason,
            QuarantineReason::Young | QuarantineReason::Undecided
        ) {
            return None;
        }
        // A node quarantined only for lacking a marker may be new (the operator may admit it):
        // noted only where this manager saw the loss itself (it trusted the server before),
        // or another manager's note is there already.
        let t = self.lock_trust();
        if reason == QuarantineReason::NoMarker && !t.note && !t.lost_seen {
            return None;
        }
        drop(t);
        let id = self.identity()?;
        let key = match &self.shard {
            Some(s) => crate::config::slot_loss_note(s.home()?),
            None => LOSS_NOTE_KEY.to_vec(),
        };
        let mut t = self.lock_trust();
        if t.note_written.as_deref() == Some(id.run_id.as_str()) {
            return None;
        }
        t.note_written = Some(id.run_id.clone());
        drop(t);
        let max_ttl = self.policy.max_ttl;
        let px = (max_ttl * 2).max(max_ttl + Duration::from_secs(2));
        let value = format!("{} {reason:?}", id.run_id);
        let mut c = Vec::new();
        resp::pack(
            &[
                b"SET",
                &key,
                value.as_bytes(),
                b"PX",
                px.as_millis().to_string().as_bytes(),
            ],
            &mut c,
        );
        Some(c)
    }

    /// The commands that write the marker (`value`: see
    /// [`Identity::marker_value`](super::Identity::marker_value)), one `SET` each: of
    /// [`MARKER_KEY`], or on a cluster node's shard of every slot it owns.
    pub(crate) fn marker_write_cmds(&self, value: &str) -> Vec<Vec<u8>> {
        let keys = match &self.shard {
            Some(s) => s
                .owned()
                .into_iter()
                .map(crate::config::slot_marker)
                .collect(),
            None => vec![MARKER_KEY.to_vec()],
        };
        (keys.iter())
            .map(|k| {
                let mut c = Vec::new();
                resp::pack(&[b"SET", k, value.as_bytes()], &mut c);
                c
            })
            .collect()
    }
}
