//! A round on cluster nodes (ARCHITECTURE.md, "Cluster nodes"): the request goes to the shard
//! that serves its slot, and the redirects a shard answers (`MOVED`, `ASK`, `TRYAGAIN`) are
//! followed by the round itself, in the caller's `poll(2)` loop, under the node's deadline. A
//! link never writes to another link, so links are locked one at a time.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use super::wait::Wait;
use super::{Cluster, Cmd, Limits, Request, Split, care};
use crate::config::with_slot_marker;
use crate::error::NodeOutcome;
use crate::node::health::{auth_refusal, redirect};
use crate::node::{Call, Expect, Link, Slot};
use crate::resp::Reply;
use crate::timing::work_allowance;

/// The most redirects one node's reply may take in one round: a slot that moves on while the
/// round follows it is refused for this step rather than chased.
const MAX_REDIRECTS: u8 = 5;

/// The error codes of a cluster's shard that a round follows.
const FOLLOWED: [&str; 3] = ["MOVED", "ASK", "TRYAGAIN"];

/// What a round writes, as it writes it again after a redirect: per *target*, one command
/// and its reply's slot in the call. Targets `0..n` are the nodes; a request split by slot
/// ([`Split`]) gives a cluster node one target per part, its first part at the node's index
/// and the others after `n`.
pub(super) struct Sending<'r> {
    cmd: Cmd<'r>,
    expect: Expect,
    pub(super) work: std::time::Duration,
    pub(super) grants: bool,
    slot: Option<u16>,
    slots: Option<&'r [Option<u16>]>,
    split: Option<Split<'r>>,
    /// Per part of `split`, what its command expects (its own `EVAL` fallback).
    part_expects: Vec<Expect>,
    /// Per target: its node, and its part of `split` (`None`: the node's whole request).
    pub(super) targets: Vec<(usize, Option<usize>)>,
}

impl<'r> Sending<'r> {
    /// The request `req` on `links` (each node's: its shards decide whether it is split).
    pub(super) fn of(req: &Request<'r>, links: &[Arc<Link>]) -> Sending<'r> {
        debug_assert!(req.combine.is_none() || req.fallback.is_none());
        debug_assert!(req.combine.is_none() || req.split.is_none());
        let expect = match req.combine {
            Some(c) => Expect::Parts(c),
            None => Expect::One(req.fallback.map(Arc::from)),
        };
        let mut targets: Vec<(usize, Option<usize>)> =
            (0..links.len()).map(|i| (i, None)).collect();
        let mut part_expects = Vec::new();
        if let Some(split) = &req.split {
            part_expects = (split.parts.iter())
                .map(|p| Expect::One(p.fallback.as_deref().map(Arc::from)))
                .collect();
            for (i, l) in links.iter().enumerate() {
                if l.shards.is_some() && !split.parts.is_empty() {
                    targets[i].1 = Some(0);
                    targets.extend((1..split.parts.len()).map(|p| (i, Some(p))));
                }
            }
        }
        Sending {
            cmd: req.cmd,
            expect,
            work: work_allowance(req.work),
            grants: req.grants,
            slot: req.slot,
            slots: req.slots,
            split: req.split,
            part_expects,
            targets,
        }
    }

    /// True when some node's request is split by slot (its targets stand for it together).
    pub(super) fn is_split(&self) -> bool {
        self.targets.iter().any(|(_, p)| p.is_some())
    }

    /// Target `t`'s node.
    pub(super) fn node(&self, t: usize) -> usize {
        self.targets[t].0
    }

    /// Target `t`'s command, if its node is asked.
    pub(super) fn cmd(&self, t: usize) -> Option<&'r [u8]> {
        let (i, part) = self.targets[t];
        match (part, self.split, self.cmd) {
            (Some(p), Some(s), _) => Some(&s.parts[p].cmd),
            (_, _, Cmd::Same(b)) => Some(b),
            (_, _, Cmd::PerNode(v)) => v.get(i).and_then(|c| c.as_deref()),
        }
    }

    /// The slot that routes target `t` on a cluster node.
    pub(super) fn slot(&self, t: usize) -> Option<u16> {
        let (i, part) = self.targets[t];
        match (part, self.split) {
            (Some(p), Some(s)) => Some(s.parts[p].slot),
            _ => self
                .slots
                .map_or(self.slot, |s| s.get(i).copied().flatten()),
        }
    }

    /// Target `t`'s command `cmd` and what it expects, as `link` runs them: on a cluster node's
    /// shard, the marker a grant checks is its slot's (`config::with_slot_marker`), in the
    /// `EVAL` fallback too.
    pub(super) fn shape<'c>(
        &'c self,
        cmd: &'c [u8],
        t: usize,
        link: &Link,
    ) -> (Cow<'c, [u8]>, Cow<'c, Expect>) {
        let base = match self.targets[t].1 {
            Some(p) => &self.part_expects[p],
            None => &self.expect,
        };
        let (Some(_), Some(slot)) = (&link.node.shard, self.slot(t)) else {
            return (Cow::Borrowed(cmd), Cow::Borrowed(base));
        };
        let expect = match base {
            Expect::One(Some(fb)) => match with_slot_marker(fb, slot) {
                Cow::Owned(f) => Cow::Owned(Expect::One(Some(Arc::from(f)))),
                Cow::Borrowed(_) => Cow::Borrowed(base),
            },
            _ => Cow::Borrowed(base),
        };
        (with_slot_marker(cmd, slot), expect)
    }

    /// The parts' combiner, for a split request.
    pub(super) fn combiner(&self) -> Option<fn(&[Reply]) -> Reply> {
        self.split.map(|s| s.combine)
    }
}

impl Cluster {
    /// The link that serves `slot` on node `top`: `top` itself, or for a cluster node the
    /// link of the shard that owns the slot (made on first use, its host name resolved by
    /// `by` at most). `Err`: what the node's outcome is, for a request with no slot or a shard
    /// address that cannot be used (or not resolved by `by`).
    pub(super) fn route(
        &self,
        top: &Arc<Link>,
        slot: Option<u16>,
        now: Instant,
        by: Instant,
    ) -> Result<Arc<Link>, NodeOutcome> {
        let Some(shards) = &top.shards else {
            return Ok(Arc::clone(top));
        };
        let Some(slot) = slot else {
            return Err(NodeOutcome::ServerError(
                "not available on a cluster node (redis+cluster://) yet".into(),
            ));
        };
        shards
            .route(slot, now, by)
            .map_err(|m| NodeOutcome::Unreachable(format!("shard: {m}")))
    }

    /// Writes again, for nobody, the commands whose redirects nobody followed (their callers
    /// had left at quorum, or never waited: a release after a failed attempt), where the
    /// redirects point; each command at most [`MAX_REDIRECTS`] times. Without this a release
    /// that met a moving slot would leave its key to expire.
    pub(super) fn follow_queued(&self, now: Instant) {
        for shards in self.links.iter().filter_map(|l| l.shards.as_ref()) {
            for link in shards.links() {
                link.read_orphans(now, &self.settings);
            }
            let queued =
                std::mem::take(&mut *shards.redirected.lock().unwrap_or_else(|p| p.into_inner()));
            for q in queued {
                let Some(r) = redirect(&q.reply, &q.asked) else {
                    continue;
                };
                if q.resend.hops >= MAX_REDIRECTS {
                    log::debug!("a command kept meeting redirects: dropped ({:?})", q.reply);
                    continue;
                }
                // Nobody waits for these: a shard whose name is still being resolved is
                // skipped (its look-up goes on), not waited for.
                let Ok(target) = shards.follow(&r, now, now) else {
                    continue;
                };
                let _ = target.resend(&q, r.ask, now, &self.settings);
                if target.orphaned() {
                    care::care(&target, &self.settings);
                }
            }
        }
    }

    /// Redirects node `i` followed, `MOVED` and `ASK` (none for a node that is no cluster).
    pub(crate) fn redirects(&self, i: usize) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.links[i]
            .shards
            .as_ref()
            .map_or((0, 0), |s| (s.moved.load(Relaxed), s.asked.load(Relaxed)))
    }

    /// Connections opened to node `i`: for a cluster node, to each of its shards.
    pub(crate) fn connections(&self, i: usize) -> u64 {
        match &self.links[i].shards {
            Some(s) => s.links().iter().map(|l| l.node.connections()).sum(),
            None => self.links[i].node.connections(),
        }
    }

    /// For a cluster node, each shard primary ("host:port") with a slot that routes to it
    /// (empty until the slot map is known); `None` for any other node.
    pub(crate) fn shard_slots(&self, i: usize) -> Option<Vec<(String, u16)>> {
        self.links[i].shards.as_ref().map(|s| s.owners())
    }

    /// Every link: each node's, and each cluster node's shard links.
    pub(super) fn all_links(&self) -> Vec<Arc<Link>> {
        let mut all: Vec<Arc<Link>> = Vec::with_capacity(self.links.len());
        for l in self.links.iter() {
            match &l.shards {
                Some(s) => all.extend(s.links()),
                None => all.push(Arc::clone(l)),
            }
        }
        all
    }

    /// A target's slot, if it holds a redirect the round follows (a shard of node `i`, a
    /// cluster node, answered `MOVED`, `ASK` or `TRYAGAIN`, and the target has redirects
    /// left).
    pub(super) fn redirect_in(&self, i: usize, slot: &Slot, w: &Wait<'_>) -> Option<Reply> {
        self.links[i].shards.as_ref()?;
        match slot {
            Slot::Reply {
                reply: r @ Reply::Error { code, .. },
                ..
            } if FOLLOWED.contains(&code.as_str()) && w.redirects < MAX_REDIRECTS => {
                Some(r.clone())
            }
            _ => None,
        }
    }

    /// Follows target `t`'s redirect `reply`: the map learns a `MOVED`; the command is written
    /// again on the link the redirect names (after `ASKING` for `ASK`; on the same link for
    /// `TRYAGAIN`), for the same call, under the same deadline (plus a connect timeout when
    /// the link must connect first, as for any node).
    pub(super) fn follow(
        &self,
        call: &Call,
        w: &mut Wait<'_>,
        t: usize,
        reply: &Reply,
        (sending, limits): (&Sending<'_>, Limits),
        now: Instant,
    ) {
        let i = sending.node(t);
        let (Some(shards), Some(link), Some(cmd)) =
            (&self.links[i].shards, w.link.clone(), sending.cmd(t))
        else {
            return;
        };
        w.redirects += 1;
        let asked = link
            .node
            .shard
            .as_ref()
            .map_or(String::new(), |s| s.endpoint.host.clone());
        let r = redirect(reply, &asked);
        let target = match &r {
            Some(r) => match shards.follow(r, now, w.deadline.unwrap_or(now)) {
                Ok(target) => target,
                Err(m) => {
                    let o = NodeOutcome::Unreachable(format!("shard: {m}"));
                    call.refill(t, Slot::Failed(o));
                    return;
                }
            },
            None => Arc::clone(&link), // TRYAGAIN
        };
        if !Arc::ptr_eq(&target, &link) && w.driving {
            w.driving = false;
            if link.leave(call) {
                care::care(&link, &self.settings);
            }
        }
        if !call.refill(t, Slot::Waiting) {
            return;
        }
        let asking = r.as_ref().is_some_and(|r| r.ask);
        let (cmd, expect) = sending.shape(cmd, t, &target);
        let sent = target.submit(
            Some(&call.at(t)),
            &cmd,
            &expect,
            sending.work,
            now,
            &self.settings,
            true,
            (sending.grants, asking),
        );
        match sent {
            Ok(Some(s)) => {
                w.driving |= s.drive;
                if s.starting && !w.starting {
                    w.starting = true;
                    let d = w.deadline.map(|d| d + self.settings.connect_timeout);
                    w.deadline = match (d, limits.cap) {
                        (Some(d), Some(c)) => Some(d.min(c)),
                        (d, _) => d,
                    };
                }
                w.link = Some(target);
            }
            Ok(None) => {}
            Err(o) => {
                call.refill(t, Slot::Failed(o));
            }
        }
    }

    /// What a reply from a cluster node's shard means when it is a cluster error the round
    /// did not (or no longer would) follow; `None` for any other reply or node.
    pub(super) fn cluster_error(&self, i: usize, reply: &Reply) -> Option<NodeOutcome> {
        self.links[i].shards.as_ref()?;
        if let Some(o) = auth_refusal(reply) {
            return Some(o);
        }
        match reply {
            Reply::Error { code, text } if FOLLOWED.contains(&code.as_str()) => Some(
                NodeOutcome::ServerError(format!("the slot kept moving: {text}")),
            ),
            Reply::Error { code, text } if code == "CLUSTERDOWN" || code == "CROSSSLOT" => {
                Some(NodeOutcome::ServerError(text.clone()))
            }
            _ => None,
        }
    }
}
