//! The quorum engine: one *round* writes a request to every node at once, waits on all of
//! them against one deadline per node, and returns as soon as the outcome is decided — a
//! quorum of successes reached, or no longer reachable.
//!
//! A primitive (a lock, a renewal, a scan) gives a round its request and a judge that reads
//! one node's reply as a [`NodeOutcome`]; the round owns everything about the transport: the
//! shared connections, late replies, per-node deadlines, the early return, restart
//! quarantine and the per-node metrics. Primitives never see a socket or a connection.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use crate::error::{Error, NodeOutcome, NodeReport, Op, Report};
use crate::metrics::Registry;
use crate::mux;
use crate::node::call::{Wakes, wake_all};
use crate::node::health::refusal;
use crate::node::{Call, ConnSettings, Expect, Link, Node, Shards, Slot, Standing};
use crate::resp::Reply;
use crate::timing::{Clock, work_allowance};

mod admit;
mod care;
mod shards;
mod split;
#[cfg(test)]
mod tests;
mod trust;
mod wait;

use shards::Sending;
pub(crate) use split::every;

use wait::Wait;

pub(crate) use crate::node::Combine;

/// The number of nodes that must agree: `n / 2 + 1`.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// What a round writes to each node.
#[derive(Clone, Copy)]
pub(crate) enum Cmd<'a> {
    /// The same command to every node.
    Same(&'a [u8]),
    /// One command per node; `None`: the node is not asked (reported as rejected).
    PerNode(&'a [Option<Vec<u8>>]),
}

/// One round's request.
#[derive(Clone, Copy)]
pub(crate) struct Request<'a> {
    pub cmd: Cmd<'a>,
    /// The `EVAL` form of an `EVALSHA` command, sent to a node that answers `NOSCRIPT`.
    pub fallback: Option<&'a [u8]>,
    /// The command is several commands written together, whose replies (exactly
    /// `parts` of them on each node) stand for one reply, the combiner's; the judge sees that
    /// one. No `fallback` then.
    pub combine: Option<Combine>,
    /// The request grants something (a lock): a node in restart quarantine is not asked, a
    /// success counts only from a trusted node (see [`Round::untrusted`]), a `NOMARKER` reply
    /// means the node lost its keyspace, and while the cluster-wide trust rule is still open
    /// the round waits for every node (see trust.rs).
    pub grants: bool,
    /// The work the command asks of each node, in keys or semaphore slots: each node's wait
    /// grows by its allowance (`timing::work_allowance`), and so does the silence its
    /// connection may keep while owing the reply (see node/link.rs).
    pub work: usize,
    /// The Redis Cluster slot of every key the command names (`slot::key_slot`), which
    /// routes it on a cluster node; `None`: not routable, so a cluster node fails it.
    pub slot: Option<u16>,
    /// Per node, the slot that routes its command instead of `slot` (a command with no key
    /// sent to one chosen shard: the scan).
    pub slots: Option<&'a [Option<u16>]>,
    /// On cluster nodes, the request as one command per slot instead of `cmd` (its keys span
    /// several slots); other nodes get `cmd`. No `combine` then.
    pub split: Option<Split<'a>>,
}

/// A request whose keys span several slots, as cluster nodes get it: a command touches one
/// slot, so a cluster node is written one command per slot, each to the shard that owns it,
/// all in the same round (one round trip when the slot map is current). The parts' replies
/// stand for the node's one reply, the combiner's, which the judge sees.
#[derive(Clone, Copy)]
pub(crate) struct Split<'a> {
    /// One per slot, in a fixed order: the combiner gets their replies in it.
    pub parts: &'a [Part],
    /// The one reply a node's parts' replies (all of them answered) stand for.
    pub combine: fn(&[Reply]) -> Reply,
}

/// One slot's command of a [`Split`] request.
pub(crate) struct Part {
    pub slot: u16,
    /// The command (an `EVALSHA`), and its `EVAL` form for a shard that answers `NOSCRIPT`.
    pub cmd: Vec<u8>,
    pub fallback: Option<Vec<u8>>,
}

/// When a round is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Until {
    /// As soon as a quorum has succeeded or can no longer succeed.
    Quorum,
    /// When every node has answered, failed or timed out.
    All,
}

/// How long a round waits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// How long to wait for a node's reply once its command is sent (plus the connect timeout
    /// when the node must be connected first): the step's bound (see `timing::Budget`).
    pub node_timeout: Duration,
    /// No node waits past this instant (an extension must not outlive the current validity).
    pub cap: Option<Instant>,
    pub until: Until,
}

impl Limits {
    /// Early return at quorum, no cap.
    pub(crate) fn quorum(node_timeout: Duration) -> Limits {
        Limits {
            node_timeout,
            cap: None,
            until: Until::Quorum,
        }
    }
}

/// The result of one round.
#[derive(Debug)]
pub(crate) struct Round {
    /// When the round started: every command was written at or after this instant.
    pub start: Instant,
    /// Per node, what happened (nodes not heard from when the round was decided: `Pending`).
    pub outcomes: Vec<NodeOutcome>,
    /// Per node, the reply, if it answered within the round.
    pub replies: Vec<Option<Reply>>,
    /// Per node: its reply was a success, but from a node in restart quarantine, so it did not
    /// count (its outcome is `Quarantined`). What it granted must be undone.
    pub untrusted: Vec<bool>,
    /// Per node: a cluster node whose request was split by slot ([`Split`]), where some parts
    /// succeeded and others did not (or not yet). What those did must be undone by whoever
    /// needs the request all or none on a node.
    pub partial: Vec<bool>,
}

impl Round {
    /// How many nodes succeeded.
    pub(crate) fn successes(&self) -> usize {
        self.outcomes.iter().filter(|o| o.is_success()).count()
    }
}

/// A judge: what node `i`'s reply means.
pub(crate) type Judge<'a> = &'a dyn Fn(usize, &Reply) -> NodeOutcome;

/// The nodes of one manager and the rounds over them.
pub(crate) struct Cluster {
    /// One per node; the caretaker (care.rs) holds those it was handed until it lets go.
    links: Arc<[Arc<Link>]>,
    settings: ConnSettings,
    clock: Arc<dyn Clock>,
    quorum: usize,
    /// Restart quarantine is on.
    policy_enabled: bool,
    /// See [`Cluster::trust_epoch`].
    trust_epoch: AtomicU64,
    /// The manager's counters: rounds update the per-node ones.
    pub(crate) metrics: Registry,
}

impl Cluster {
    /// The nodes, each with its shards if it is a cluster node.
    pub(crate) fn new(
        nodes: Vec<(Node, Option<Shards>)>,
        settings: ConnSettings,
        clock: Arc<dyn Clock>,
        quarantine: bool,
    ) -> Cluster {
        let now = clock.now();
        let n = nodes.len();
        Cluster {
            links: (nodes.into_iter())
                .map(|(node, shards)| match shards {
                    Some(s) => Arc::new(Link::cluster(node, s, now)),
                    None => Arc::new(Link::new(node, now)),
                })
                .collect(),
            settings,
            clock,
            quorum: quorum(n),
            policy_enabled: quarantine,
            trust_epoch: AtomicU64::new(0),
            metrics: Registry::new(n),
        }
    }

    /// The manager's clock.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The current instant, from the manager's clock.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The settings of every connection.
    pub(crate) fn settings(&self) -> &ConnSettings {
        &self.settings
    }

    /// `N / 2 + 1`.
    pub(crate) fn quorum(&self) -> usize {
        self.quorum
    }

    /// The nodes, in configuration order.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.links.iter().map(|l| &l.node)
    }

    /// True when some node is a cluster node (`redis+cluster://`): its commands are routed by
    /// slot, so every key one command names must share a slot.
    pub(crate) fn has_shards(&self) -> bool {
        self.links.iter().any(|l| l.shards.is_some())
    }

    /// The number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    /// The number of nodes that may vote: all but those found to be the same server as
    /// another (see [`NodeOutcome::Duplicate`]).
    pub(crate) fn voters(&self) -> usize {
        self.nodes().filter(|n| n.duplicate_of().is_none()).count()
    }

    /// True when so many nodes answered that the key is not ours (`rejected` of them) that no
    /// quorum can hold it: the lock is known lost, not merely unconfirmed.
    pub(crate) fn lost_for_sure(&self, rejected: usize) -> bool {
        self.voters().saturating_sub(rejected) < self.quorum
    }

    /// Runs one round: writes the request to every node, then reads replies until the round
    /// is decided (see [`Until`]) or every node has answered, failed or timed out.
    pub(crate) fn round(
        &self,
        req: &Request<'_>,
        judge: Judge<'_>,
        limits: Limits,
    ) -> Result<Round, Error> {
        let internal = |e: std::io::Error| Error::Internal(format!("poll(2) failed: {e}"));
        let sending = Sending::of(req, &self.links);
        let call = Call::new(sending.targets.len()).map_err(internal)?;
        let start = self.now();
        if self.has_shards() {
            self.follow_queued(start);
        }
        if req.grants {
            if self.has_shards() && self.trust_open() {
                self.meet_shards(start);
            }
            self.decide_trust(start);
        }
        self.probe_idle(start);
        let wakes = RefCell::new(Wakes::new());
        let mut waits = self.submit(&call, req, &sending, limits, start, &wakes);
        waits.push(Wait::wake(&call, &wakes));
        let q = self.quorum;
        let r = mux::drive(&mut waits, &|| self.clock.now(), |waits| {
            // The replies read for other calls since the last look: one wake-up each.
            wake_all(&mut wakes.borrow_mut(), call.id());
            let (ok, waiting, redirected) = call.look(|slots, handed| {
                for t in handed {
                    waits[t].driving = true;
                }
                // Redirects a cluster node's shard answered: followed below, still waiting.
                let redirected: Vec<(usize, Reply)> = (slots.iter().enumerate())
                    .filter_map(|(t, s)| {
                        let r = self.redirect_in(sending.node(t), s, &waits[t]);
                        r.map(|r| (t, r))
                    })
                    .collect();
                for (t, (w, s)) in waits.iter_mut().zip(slots).enumerate() {
                    if *s != Slot::Waiting && !redirected.iter().any(|(r, _)| *r == t) {
                        w.deadline = None;
                    }
                }
                let (ok, waiting) = self.count_targets(slots, &redirected, &sending, judge, waits);
                (ok, waiting, redirected)
            });
            let now = self.now();
            for (t, reply) in redirected {
                self.follow(&call, &mut waits[t], t, &reply, (&sending, limits), now);
            }
            let until = if req.grants && self.trust_open() {
                Until::All
            } else {
                limits.until
            };
            waiting == 0
                || match until {
                    Until::Quorum => ok >= q || ok + waiting < q,
                    Until::All => false,
                }
        });
        wake_all(&mut wakes.borrow_mut(), call.id());
        let (slots, handed) = call.close();
        for (t, w) in waits.iter().enumerate() {
            if let Some(link) = &w.link
                && (w.driving || handed.contains(&t))
                && link.leave(&call)
            {
                care::care(link, &self.settings);
            }
        }
        r.map_err(internal)?;
        if req.grants {
            // What this round's handshakes revealed may decide undecided nodes: decide before
            // reading the outcomes, so that they say why a node did not count. (A cluster
            // node's other shards are met first: the rule needs them all.)
            if self.has_shards() && self.trust_open() {
                self.meet_shards(self.now());
            }
            self.decide_trust(self.now());
        }
        // The link each node's command went to (a cluster node's shard): whose trust counts.
        let routed = self.routed(&waits, &sending);
        let partial = split::partial(&slots, &sending, judge, self.links.len());
        let slots = split::per_node(slots, &[], &sending, self.links.len());
        let mut round = self.finish(start, slots, (req.grants, &routed), judge);
        round.partial = partial;
        Ok(round)
    }

    /// Successes that count and nodes still waiting, from the targets' slots (`redirected`:
    /// those being redirected, still waiting).
    fn count_targets(
        &self,
        slots: &[Slot],
        redirected: &[(usize, Reply)],
        sending: &Sending<'_>,
        judge: Judge<'_>,
        waits: &[Wait<'_>],
    ) -> (usize, usize) {
        if !sending.is_split() {
            let (ok, waiting) = self.count(slots, sending.grants, judge, waits, sending);
            return (ok, waiting + redirected.len());
        }
        let following: Vec<usize> = redirected.iter().map(|(t, _)| *t).collect();
        let nodes = split::per_node(slots.to_vec(), &following, sending, self.links.len());
        self.count(&nodes, sending.grants, judge, waits, sending)
    }

    /// Per node, the link whose node's trust its grant needs: the shard its command went to,
    /// or for a request split by slot, the first of its shards that is not trusted (else its
    /// first part's).
    fn routed(&self, waits: &[Wait<'_>], sending: &Sending<'_>) -> Vec<Arc<Link>> {
        let link_of = |t: usize| waits[t].link.clone();
        (self.links.iter().enumerate())
            .map(|(i, l)| {
                let untrusted = (sending.targets.iter().enumerate())
                    .filter(|(_, (node, part))| *node == i && part.is_some())
                    .filter_map(|(t, _)| link_of(t))
                    .find(|l| !l.node.trusted());
                untrusted
                    .or_else(|| link_of(i))
                    .unwrap_or_else(|| Arc::clone(l))
            })
            .collect()
    }

    /// Closes idle connections the nodes have closed (a restarted node) before they are used,
    /// with one zero-timeout `poll(2)` for all of them.
    fn probe_idle(&self, now: Instant) {
        let links = self.all_links();
        let idle: Vec<(&Arc<Link>, std::os::fd::RawFd, u64)> = (links.iter())
            .filter_map(|l| l.idle_fd(now).map(|(fd, g)| (l, fd, g)))
            .collect();
        if idle.is_empty() {
            return;
        }
        let fds: Vec<_> = idle.iter().map(|(_, fd, _)| *fd).collect();
        let Ok(dead) = mux::probe_idle(&fds) else {
            return;
        };
        for ((link, _, generation), dead) in idle.into_iter().zip(dead) {
            if dead {
                link.drop_probed(generation);
            }
        }
    }

    /// Writes the request to every node; one wait per node.
    fn submit<'a>(
        &'a self,
        call: &'a Call,
        req: &Request<'_>,
        sending: &Sending<'_>,
        limits: Limits,
        start: Instant,
        wakes: &'a RefCell<Wakes>,
    ) -> Vec<Wait<'a>> {
        let work = sending.work;
        let mut waits = Vec::with_capacity(sending.targets.len() + 1);
        for (t, &(i, _)) in sending.targets.iter().enumerate() {
            let top = &self.links[i];
            let cmd = sending.cmd(t);
            // A cluster node's request goes to the shard that serves its slot.
            let slot = sending.slot(t);
            // A shard's host name is resolved within the node's time at most.
            let by = start + limits.node_timeout;
            let by = limits.cap.map_or(by, |c| c.min(by));
            let (link, routed) = match self.route(top, slot, start, by) {
                Ok(l) => (l, Ok(())),
                Err(o) => (Arc::clone(top), Err(o)),
            };
            let mut w = Wait::node(self, (call, t), Arc::clone(&link), wakes);
            w.slot = slot;
            // On a shard, a grant checks the marker of its slot.
            let shaped = cmd.map(|c| sending.shape(c, t, &link));
            let quarantined = match link.node.standing() {
                Standing::Quarantined { until, reason } if req.grants => {
                    Some((until.saturating_duration_since(start), reason))
                }
                _ => None,
            };
            let sent = match (link.node.duplicate_of(), quarantined, &shaped) {
                _ if routed.is_err() => Err(routed.clone().expect_err("checked")),
                // The same server as a lower node: asked through that one only.
                (Some(of), _, _) => Err(NodeOutcome::Duplicate { of }),
                (None, Some((remaining, reason)), _) => {
                    Err(NodeOutcome::Quarantined { remaining, reason })
                }
                (None, None, None) => Err(NodeOutcome::Rejected),
                (None, None, Some((cmd, expect))) => link
                    .submit(
                        Some(&call.at(t)),
                        cmd,
                        expect,
                        work,
                        start,
                        &self.settings,
                        true,
                        (req.grants, false),
                    )
                    .map(|s| s.expect("submit connects when asked to")),
            };
            match sent {
                Ok(s) => {
                    w.driving = s.drive;
                    w.starting = s.starting;
                    let mut wait = limits.node_timeout.saturating_add(work);
                    if let Some(a) = link.node.ack.as_ref().filter(|_| req.grants) {
                        // The server answers once WAIT is over.
                        wait = wait.saturating_add(a.timeout);
                    }
                    if s.starting {
                        wait = wait.saturating_add(self.settings.connect_timeout);
                        if link.node.group.is_some() {
                            // A sentinel's connection and answer come first.
                            wait = wait.saturating_add(self.settings.connect_timeout);
                        }
                    }
                    // A wait is at most days (a u32 of milliseconds and the allowances), so
                    // this never saturates in practice; it must not panic if it did.
                    let d = start
                        .checked_add(wait)
                        .unwrap_or(start + Duration::from_secs(86_400));
                    w.deadline = Some(limits.cap.map_or(d, |c| d.min(c)));
                }
                Err(o) => {
                    call.fill(t, Slot::Failed(o));
                }
            }
            waits.push(w);
        }
        waits
    }

    /// Successes that count, and nodes still waiting, from one slot per node. A grant counts
    /// only where every link its node's command went to is trusted.
    fn count(
        &self,
        slots: &[Slot],
        grants: bool,
        judge: Judge<'_>,
        waits: &[Wait<'_>],
        sending: &Sending<'_>,
    ) -> (usize, usize) {
        let trusted = |i: usize| {
            (sending.targets.iter().enumerate())
                .filter(|(_, (node, _))| *node == i)
                .all(|(t, _)| {
                    let link = waits.get(t).and_then(|w| w.link.as_ref());
                    link.unwrap_or(&self.links[i]).node.trusted()
                })
        };
        let mut ok = 0;
        let mut waiting = 0;
        for (i, s) in slots.iter().enumerate() {
            match s {
                Slot::Waiting => waiting += 1,
                Slot::Reply { reply, acks, .. }
                    if judge(i, reply).is_success()
                        && (!grants || (trusted(i) && self.acked(i, *acks))) =>
                {
                    ok += 1;
                }
                _ => {}
            }
        }
        (ok, waiting)
    }

    /// Turns the final slots into outcomes, and counts them in the metrics.
    fn finish(
        &self,
        start: Instant,
        slots: Vec<Slot>,
        (grants, routed): (bool, &[Arc<Link>]),
        judge: Judge<'_>,
    ) -> Round {
        let n = slots.len();
        let mut round = Round {
            start,
            outcomes: Vec::with_capacity(n),
            replies: Vec::with_capacity(n),
            untrusted: vec![false; n],
            partial: vec![false; n],
        };
        let now = self.now();
        for (i, slot) in slots.into_iter().enumerate() {
            let (outcome, reply, latency) = match slot {
                Slot::Waiting => (NodeOutcome::Pending, None, None),
                Slot::Failed(o) => (o, None, None),
                Slot::Reply {
                    reply,
                    latency,
                    acks,
                } => {
                    let o = if let Some(of) = self.links[i].node.duplicate_of() {
                        // Found out in this round's handshake: its answer does not count.
                        NodeOutcome::Duplicate { of }
                    } else if let Some(o) = self.cluster_error(i, &reply) {
                        // A cluster node's shard: down, or redirects that did not settle.
                        o
                    } else if let Some(o) = refusal(&reply) {
                        // Whatever was asked: NOPERM (or NOAUTH) is a refusal of our
                        // credentials, and a node in cluster mode (whose handshake could not
                        // tell, INFO being renamed) says so, not just "MOVED …".
                        o
                    } else if grants {
                        let untrusted = &mut round.untrusted[i];
                        let node = &routed[i].node;
                        self.trusted_outcome((i, node), (&reply, acks), judge, now, untrusted)
                    } else {
                        judge(i, &reply)
                    };
                    (o, Some(reply), Some(latency))
                }
            };
            self.metrics.node(i, &outcome, latency);
            round.outcomes.push(outcome);
            round.replies.push(reply);
        }
        round
    }

    /// What a reply to a grant request means, with restart quarantine: `NOMARKER` is a node
    /// that lost its keyspace (or was never marked); a success from a node that is not trusted
    /// does not count, and is flagged in `untrusted` to be undone.
    /// A success that its replicas did not acknowledge (see `Config::replica_acks`) does not
    /// count either, and is undone the same way.
    fn trusted_outcome(
        &self,
        (i, node): (usize, &Node),
        (reply, acks): (&Reply, Option<u64>),
        judge: Judge<'_>,
        now: Instant,
        untrusted: &mut bool,
    ) -> NodeOutcome {
        // NOMARKER: the link told the node already (node/link.rs).
        if !reply.is_error_code("NOMARKER") {
            let o = judge(i, reply);
            if !o.is_success() {
                return o;
            }
            if !self.acked(i, acks) {
                *untrusted = true;
                let wanted = node.ack.as_ref().map_or(0, |a| a.replicas);
                return NodeOutcome::Unacknowledged {
                    acknowledged: acks.unwrap_or(0),
                    wanted,
                };
            }
            if node.trusted() {
                return o;
            }
            *untrusted = true;
        }
        let (remaining, reason) = node
            .quarantine(now)
            .unwrap_or((Duration::ZERO, crate::error::QuarantineReason::Undecided));
        NodeOutcome::Quarantined { remaining, reason }
    }

    /// True when node `i`'s grant needs no acknowledgement, or `acks` replicas are enough.
    fn acked(&self, i: usize, acks: Option<u64>) -> bool {
        self.links[i]
            .node
            .ack
            .as_ref()
            .is_none_or(|a| a.enough(acks))
    }

    /// Writes `cmd` to the nodes `to` selects, without waiting for the replies (they are read
    /// and discarded later). Nodes with no connection are skipped. Used to release after a
    /// failed acquisition, so that the caller does not wait a round trip for the clean-up.
    /// `work` and `slot`: as [`Request::work`] and [`Request::slot`].
    pub(crate) fn detach(
        &self,
        cmd: &[u8],
        fallback: Option<&[u8]>,
        (work, slot): (usize, Option<u16>),
        to: &dyn Fn(usize) -> bool,
    ) {
        let now = self.now();
        if self.has_shards() {
            self.follow_queued(now);
        }
        let work = work_allowance(work);
        let expect = Expect::One(fallback.map(Arc::from));
        for (i, top) in self.links.iter().enumerate() {
            if !to(i) {
                continue;
            }
            // Nobody waits for this command: no look-up is waited for either.
            let Ok(link) = self.route(top, slot, now, now) else {
                continue;
            };
            // Queued behind whatever the connection already carries (the command being
            // cleaned up among it), so the node runs it after that.
            let nothing = (false, false);
            let _ = link.submit(
                None,
                cmd,
                &expect,
                work,
                now,
                &self.settings,
                false,
                nothing,
            );
            if link.orphaned() {
                care::care(&link, &self.settings);
            }
        }
    }

    /// A report of one step from its per-node outcomes.
    pub(crate) fn report(
        &self,
        op: Op,
        outcomes: Vec<NodeOutcome>,
        detail: Option<String>,
    ) -> Report {
        let successes = outcomes.iter().filter(|o| o.is_success()).count();
        for (node, o) in self.nodes().zip(outcomes.iter()) {
            if !o.is_answer() && *o != NodeOutcome::Pending {
                log::debug!("{op:?} on node {} ({}): {o:?}", node.index, node.addr);
            }
        }
        Report {
            op,
            successes,
            quorum: self.quorum,
            nodes: self
                .nodes()
                .zip(outcomes)
                .map(|(n, outcome)| NodeReport {
                    index: n.index,
                    addr: n.addr_text.clone(),
                    outcome,
                })
                .collect(),
            detail,
            expires_in: None,
        }
    }

    /// Sorts a failed step into "unavailable" (so many nodes failed — timeouts, errors,
    /// unreachable — that a quorum was impossible whatever the others said) or the refusal
    /// `refused` (enough nodes answered or were still answering; too few said yes). Nodes
    /// still pending when the step was decided did not fail.
    ///
    /// An unavailable step is [`Error::Auth`] instead when the nodes that refused our
    /// credentials are what made a quorum impossible: counted as answering, they would have
    /// left one possible. (Where other failures alone already rule a quorum out, fixing the
    /// credentials would not be enough: that stays `Unavailable`.)
    pub(crate) fn failure(&self, report: Report, refused: fn(Report) -> Error) -> Error {
        let failed = |n: &&NodeReport| !n.outcome.is_answer() && n.outcome != NodeOutcome::Pending;
        let failed = report.nodes.iter().filter(failed).count();
        let auth = report
            .nodes
            .iter()
            .filter(|n| matches!(n.outcome, NodeOutcome::AuthFailed(_)))
            .count();
        let left = report.nodes.len() - failed;
        if left >= self.quorum {
            refused(report)
        } else if left + auth >= self.quorum {
            Error::Auth(report)
        } else {
            Error::Unavailable(report)
        }
    }

    /// How many replies node `i`'s connection owes (tests).
    #[cfg(test)]
    fn owed(&self, i: usize) -> Option<usize> {
        self.links[i].owed()
    }
}
