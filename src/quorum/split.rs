//! A request split by slot ([`Split`](super::Split)): a cluster node gets one command per
//! slot, each a *target* of the round with a slot of its own in the call (see
//! [`Sending`]). Here the targets' slots become the one slot per node that the rest of the
//! round (the count, the outcomes, the metrics) reads.

use std::time::Duration;

use super::shards::Sending;
use super::{Cluster, Judge, Split};
use crate::node::Slot;
use crate::resp::Reply;

/// Per node, the one slot its targets' slots stand for: waiting while one of them waits (or
/// is being redirected: `following`, by target); failed as the first of them that failed;
/// else a reply, the combiner's over its parts' replies in part order, with the longest
/// latency and the fewest replica acknowledgements. Without a split, the slots as they are.
pub(super) fn per_node(
    mut slots: Vec<Slot>,
    following: &[usize],
    sending: &Sending<'_>,
    n: usize,
) -> Vec<Slot> {
    let Some(combine) = sending.combiner().filter(|_| sending.is_split()) else {
        slots.truncate(n);
        return slots;
    };
    (0..n)
        .map(|i| {
            let parts: Vec<(usize, &Slot)> = (sending.targets.iter().enumerate())
                .filter(|(_, (node, _))| *node == i)
                .map(|(t, _)| (t, &slots[t]))
                .collect();
            node_slot(&parts, following, combine)
        })
        .collect()
}

/// A combiner for scripts that answer 1 for "done on every key" and 0 for "not": the first
/// reply that is not an integer (an error), else the smallest, so 1 only when every part
/// said 1.
pub(crate) fn every(replies: &[Reply]) -> Reply {
    if let Some(odd) = replies.iter().find(|r| !matches!(r, Reply::Int(_))) {
        return odd.clone();
    }
    let ints = replies.iter().filter_map(|r| match r {
        Reply::Int(n) => Some(*n),
        _ => None,
    });
    Reply::Int(ints.min().unwrap_or(0))
}

/// One node's slot from its targets' (`parts`: each target's index and slot, in part order).
fn node_slot(
    parts: &[(usize, &Slot)],
    following: &[usize],
    combine: fn(&[Reply]) -> Reply,
) -> Slot {
    if let [(t, only)] = parts
        && !following.contains(t)
    {
        return (*only).clone();
    }
    if parts
        .iter()
        .any(|(t, s)| **s == Slot::Waiting || following.contains(t))
    {
        return Slot::Waiting;
    }
    if let Some(failed) = parts.iter().find(|(_, s)| matches!(s, Slot::Failed(_))) {
        return failed.1.clone();
    }
    let mut replies = Vec::with_capacity(parts.len());
    let mut latency = Duration::ZERO;
    let mut acks: Option<u64> = None;
    for (_, s) in parts {
        if let Slot::Reply {
            reply,
            latency: l,
            acks: a,
        } = s
        {
            replies.push(reply.clone());
            latency = latency.max(*l);
            acks = match (acks, *a) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
        }
    }
    Slot::Reply {
        reply: combine(&replies),
        latency,
        acks,
    }
}

/// Per node: its request was split, and some of its parts' replies were successes while
/// others were not (or had not come).
pub(super) fn partial(
    slots: &[Slot],
    sending: &Sending<'_>,
    judge: Judge<'_>,
    n: usize,
) -> Vec<bool> {
    let mut some = vec![false; n];
    let mut all = vec![true; n];
    for (t, (i, part)) in sending.targets.iter().enumerate() {
        if part.is_none() || *i >= n {
            continue;
        }
        let ok = match &slots[t] {
            Slot::Reply { reply, .. } => judge(*i, reply).is_success(),
            _ => false,
        };
        some[*i] |= ok;
        all[*i] &= ok;
    }
    some.iter().zip(&all).map(|(s, a)| *s && !*a).collect()
}

impl Cluster {
    /// [`detach`](Cluster::detach) of a request that may be split by slot: on cluster nodes
    /// each part where its slot is served, on the others the whole command `cmd` (routed by
    /// `slot` on a cluster node when there is no split).
    pub(crate) fn detach_split(
        &self,
        (cmd, fallback, slot): (&[u8], Option<&[u8]>, Option<u16>),
        split: Option<Split<'_>>,
        work: usize,
        to: &dyn Fn(usize) -> bool,
    ) {
        let Some(split) = split else {
            return self.detach(cmd, fallback, (work, slot), to);
        };
        let clustered = |i: usize| self.links[i].shards.is_some();
        self.detach(cmd, fallback, (work, slot), &|i| to(i) && !clustered(i));
        for p in split.parts {
            let on = |i: usize| to(i) && clustered(i);
            self.detach(&p.cmd, p.fallback.as_deref(), (work, Some(p.slot)), &on);
        }
    }
}
