//! Restart quarantine's cluster-wide rule: which nodes' grants count.
//!
//! A node is trusted only when it cannot have lost a lock key that some holder still relies
//! on. What the client can check is a marker: the key `redlock-marker`, which holds the node's
//! `run_id` as of the time it was written, and which is written only while the node is
//! trusted. Each node's handshake reads its `run_id` and its marker (node/health.rs):
//!
//! * the marker holds the current `run_id`: trusted (its keyspace survived since then);
//! * the marker holds another `run_id`, or this manager saw the `run_id` change: it
//!   restarted, or it is a replica promoted after a failover (the marker replicated from the
//!   old master), possibly without the latest writes; quarantined until a maximum TTL after
//!   this manager first saw it so (node/health/quarantine.rs says why not from its start);
//! * no marker, where this manager had seen one: its keyspace was lost without a restart
//!   (`FLUSHALL`); quarantined until a maximum TTL after the loss was seen;
//! * no marker otherwise: undecided, and this rule decides, once it can:
//!   - some node has a marker (current or stale) or a loss note: the cluster has met this
//!     library before, so the node lost its keyspace: quarantined until a maximum TTL after it
//!     was first seen;
//!   - no node has one, and every configured node has answered: if every node is younger than
//!     the maximum TTL, a brand-new cluster: all trusted at once; otherwise a long-running
//!     cluster meeting this library for the first time: the old nodes are trusted, the young
//!     ones wait until a maximum TTL after their start;
//!   - otherwise it waits for the others (grant rounds wait for every node meanwhile), but no
//!     longer than a maximum TTL after it first saw the node: a node held that long is safe
//!     whatever it lost, so a fresh cluster with a node down works after that, as before.
//!
//! A node that leaves quarantine, or is trusted by this rule, gets its marker written (with
//! the `run_id` of the handshake that decided, so a restart in between leaves a stale marker,
//! never a false one). Quarantined nodes have their marker re-read with backoff, so that a
//! benign race (a second process arriving while the first writes a fresh cluster's markers)
//! costs a fraction of a second, not the maximum TTL, and a failed attempt re-reads the markers
//! of nodes quarantined that way in the last second before it gives up
//! (`reread_fresh_markers`). Grant scripts check that the marker
//! exists atomically with the grant, so a trusted node that loses its keyspace stops granting
//! at once, for every manager.
//!
//! A manager that quarantines a node because it saw it lose its keyspace (a restart, a flush,
//! a promotion, a stale marker) writes a loss note on it (`LOSS_NOTE_KEY`, expiring after two
//! maximum TTLs), which every handshake reads: without it, a cluster whose every node restarted
//! empty in turn within the maximum TTL has no marker left and looks brand-new to a manager
//! that arrives then, which would grant locks that holders still rely on.
//!
//! The one case this cannot tell apart: every node losing its data within the maximum TTL with
//! no manager that knew the cluster seeing it (so no note was written) looks like a brand-new
//! cluster.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How recently a node must have been quarantined for lacking a marker for a failed attempt
/// to re-read it at once (see [`Cluster::reread_fresh_markers`]).
const FRESH: Duration = Duration::from_secs(1);

/// The pause between two re-reads, and how many at most.
const REREAD_PAUSE: Duration = Duration::from_millis(50);
const REREADS: usize = 20;

use std::sync::Arc;

use super::{Cluster, Cmd, Limits, Request, Until};
use crate::error::{NodeOutcome, QuarantineReason};
use crate::node::health::Hs;
use crate::node::{Link, Standing};

impl Cluster {
    /// True while the cluster-wide rule may still trust undecided nodes: no node has shown a
    /// marker, and some node is undecided or not heard from. Grant rounds then wait for every
    /// node, so that the rule can decide right after them.
    pub(super) fn trust_open(&self) -> bool {
        if !self.policy_enabled {
            return false;
        }
        let units = self.units();
        !units.iter().any(|l| l.node.marker_seen())
            && (!self.all_heard_from()
                || units.iter().any(|l| {
                    matches!(
                        l.node.standing(),
                        Standing::Unknown | Standing::Undecided { .. }
                    )
                }))
    }

    /// The nodes restart quarantine judges, each with its own marker: every standalone node
    /// (or failover group), and every shard of a cluster node (which has no server of its
    /// own).
    fn units(&self) -> Vec<Arc<Link>> {
        self.all_links()
    }

    /// True once every configured node has answered a handshake: a cluster node once each
    /// primary its slot map names as owning a slot has (and its map is known).
    fn all_heard_from(&self) -> bool {
        let now = self.now();
        self.links.iter().all(|l| match &l.shards {
            None => l.node.heard_from(),
            Some(s) => {
                let (owning, all) = s.owning_links(now, now);
                all && !owning.is_empty() && owning.iter().all(|x| x.node.heard_from())
            }
        })
    }

    /// While the cluster-wide rule is open, connects to every shard primary a cluster node's
    /// slot map names that has not answered yet (a `PING` for nobody, tended by the
    /// caretaker), and waits for their handshakes, at most a connect timeout: shards are
    /// otherwise met only when a key of theirs is asked for, and the rule needs every one of
    /// them before it calls a cluster brand-new. Only while the rule is open, so once per
    /// fresh manager.
    pub(super) fn meet_shards(&self, now: Instant) {
        let mut ping = Vec::new();
        crate::resp::pack(&[b"PING"], &mut ping);
        let expect = crate::node::Expect::One(Option::None);
        let mut met: Vec<Arc<Link>> = Vec::new();
        for s in self.links.iter().filter_map(|l| l.shards.as_ref()) {
            for link in s.owning_links(now, now + self.settings.connect_timeout).0 {
                if link.node.heard_from() || link.node.failing() {
                    continue;
                }
                if !link.has_conn() {
                    let (zero, no) = (Duration::ZERO, (false, false));
                    let sent =
                        link.submit(None, &ping, &expect, zero, now, &self.settings, true, no);
                    if sent.is_err() {
                        continue;
                    }
                    if link.orphaned() {
                        super::care::care(&link, &self.settings);
                    }
                }
                met.push(link);
            }
        }
        // Bounded in count and time: the caretaker drives the connections meanwhile.
        let until = now + self.settings.connect_timeout;
        for _ in 0..10_000 {
            let waiting = met
                .iter()
                .any(|l| !l.node.heard_from() && !l.node.failing() && l.has_conn());
            if !waiting || self.now() >= until {
                break;
            }
            crate::park::pause(Duration::from_millis(1));
        }
    }

    /// Applies the rule at `now`: ends quarantines that are over, decides undecided nodes when
    /// it can, writes the markers of newly trusted nodes and re-reads those of quarantined
    /// ones. Bumps the trust epoch when a node became trusted.
    pub(super) fn decide_trust(&self, now: Instant) {
        if !self.policy_enabled {
            return;
        }
        let units = self.units();
        let mut trusted: Vec<Arc<Link>> = Vec::new();
        for l in &units {
            if let Standing::Quarantined { until, .. } = l.node.standing()
                && until <= now
            {
                trusted.push(Arc::clone(l));
            }
        }
        self.decide_undecided(&units, now, &mut trusted);
        for link in &trusted {
            if let Some(run_id) = link.node.make_trusted() {
                log::info!(
                    "node {} ({}) trusted; writing its marker",
                    link.node.index,
                    link.node.addr
                );
                for cmd in link.node.marker_write_cmds(&run_id) {
                    link.send_health(&cmd, Hs::MarkerWrite, now, &self.settings);
                }
            }
        }
        if !trusted.is_empty() {
            self.trust_epoch.fetch_add(1, Ordering::Release);
        }
        for link in &units {
            // Told on the node, for managers that meet the cluster later (see
            // `LOSS_NOTE_KEY`): without it, a cluster whose every node restarted within the
            // maximum TTL has no marker left and looks brand-new.
            if let Some(cmd) = link.node.loss_note_cmd() {
                link.send_health(&cmd, Hs::NoteWrite, now, &self.settings);
            }
            if link.node.probe_due(now)
                && let Some(cmd) = link.node.marker_probe_cmd()
            {
                link.send_health(&cmd, Hs::MarkerProbe, now, &self.settings);
            }
        }
    }

    fn decide_undecided(&self, units: &[Arc<Link>], now: Instant, trusted: &mut Vec<Arc<Link>>) {
        let undecided: Vec<(&Arc<Link>, Instant)> = (units.iter())
            .filter_map(|l| match l.node.standing() {
                Standing::Undecided { since } => Some((l, since)),
                _ => None,
            })
            .collect();
        if undecided.is_empty() {
            return;
        }
        if units.iter().any(|l| l.node.marker_seen()) {
            // The cluster has met this library before: these nodes lost their keyspace.
            for (l, since) in undecided {
                let n = &l.node;
                let seen = n.first_seen().unwrap_or(since).min(since);
                n.make_quarantined(seen + n.max_ttl(), QuarantineReason::NoMarker);
            }
            return;
        }
        if !self.all_heard_from() {
            // Every configured node must answer before a cluster counts as brand-new. Until
            // then an undecided node is held like one that lost its data when first seen: it
            // is trusted once a maximum TTL has passed since, whatever the others say.
            for (l, since) in undecided {
                if since + l.node.max_ttl() <= now {
                    trusted.push(Arc::clone(l));
                }
            }
            return;
        }
        let brand_new = (units.iter())
            .filter(|l| l.node.heard_from())
            .all(|l| l.node.young(now));
        for (l, _) in undecided {
            let n = &l.node;
            if brand_new || !n.young(now) {
                trusted.push(Arc::clone(l));
            } else {
                n.make_quarantined(n.young_until(now), QuarantineReason::Young);
            }
        }
        if brand_new {
            log::info!("a brand-new cluster (no node has a marker, all are young): trusted");
        }
    }

    /// After a failed attempt: re-reads the markers of the nodes quarantined in the last
    /// second for lacking one while other nodes have one, in rounds bounded by `limit`, until
    /// one of them holds its `run_id`, that second has passed, `until` has come or `stop` says
    /// so; trusts each that holds its `run_id` (which bumps the trust epoch, so the caller
    /// tries again at once). Returns whether any did.
    ///
    /// Why: managers that meet a brand-new cluster at the same moment see each other's markers
    /// half written. One that finds markers on some nodes and none yet on others applies "the
    /// cluster has met this library: those nodes lost their keyspace" to nodes whose marker
    /// another manager is writing right then. The backoff probes settle it within a fraction
    /// of a second for a caller that waits, but a single attempt would be refused for the
    /// maximum TTL. Trusting a node whose marker holds its current `run_id` is the probes'
    /// own rule (a marker is written only by a manager that trusts the node).
    pub(crate) fn reread_fresh_markers(
        &self,
        limit: Duration,
        until: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> bool {
        let now = self.now();
        // Per node, when its fresh quarantine's second ends.
        let fresh: Vec<Option<Instant>> = self
            .nodes()
            .map(|n| match n.standing() {
                Standing::Quarantined {
                    until,
                    reason: QuarantineReason::NoMarker,
                } => until
                    .checked_sub(n.max_ttl())
                    .map(|s| s + FRESH)
                    .filter(|end| *end > now),
                _ => None,
            })
            .collect();
        let Some(end) = fresh.iter().flatten().max().copied() else {
            return false;
        };
        let end = until.map_or(end, |u| u.min(end));
        // Bounded in count too: a manual clock in tests does not advance on its own.
        for _ in 0..REREADS {
            if self.reread_once(&fresh, limit) {
                return true;
            }
            let now = self.now();
            if now >= end || stop() {
                return false;
            }
            crate::park::pause(REREAD_PAUSE.min(end - now));
        }
        false
    }

    /// One round of [`reread_fresh_markers`](Self::reread_fresh_markers).
    fn reread_once(&self, fresh: &[Option<Instant>], limit: Duration) -> bool {
        let mut cmd = Vec::new();
        crate::resp::pack(&[b"GET", crate::config::MARKER_KEY], &mut cmd);
        let req = Request {
            cmd: Cmd::Same(&cmd),
            fallback: None,
            combine: None,
            slot: None,
            slots: None,
            split: None,
            grants: false,
            work: 1,
        };
        let limits = Limits {
            node_timeout: limit,
            cap: None,
            until: Until::All,
        };
        let Ok(round) = self.round(&req, &|_, _| NodeOutcome::Success, limits) else {
            return false;
        };
        let mut any = false;
        for (i, reply) in round.replies.iter().enumerate() {
            if let (Some(_), Some(r)) = (fresh[i], reply) {
                let n = &self.links[i].node;
                n.observe_probe(r);
                any |= n.trusted();
            }
        }
        if any {
            self.trust_epoch.fetch_add(1, Ordering::Release);
        }
        any
    }

    /// Bumped whenever a node becomes trusted: an acquisition that failed while it happened
    /// may retry at once.
    pub(crate) fn trust_epoch(&self) -> u64 {
        self.trust_epoch.load(Ordering::Acquire)
    }
}
