//! The counting semaphore: at most P valid leases at once, whatever the faults the lock
//! survives. A permit is one of P *slots*, held by a quorum of nodes exactly as a lock is, so
//! the mutual exclusion of each slot bounds the count (the proof is beside
//! [`SEMAPHORE_ACQUIRE`](crate::scripts::SEMAPHORE_ACQUIRE)). Counting how many nodes admitted a
//! caller, as the multi-master semaphores before this one do, does not bound it: five callers
//! can each be admitted by a different majority of five nodes with P = 3.
//!
//! On each node the semaphore is one hash (its slots and one hold per lease); an attempt is
//! one round in which every node takes the first free slot from a random start, so nodes that
//! agree on which slots are free (the usual case) pick the same one: one round trip. When the
//! granting nodes picked different slots and none has a quorum, each also reported which slots
//! it could have given; a second round then asks every node for one slot that enough of them
//! reported free. The lease's validity counts from the first round's start.
//!
//! The lease is a hold in the hash, owned by [`SEMAPHORE_OWNER`]: release, extension, renewal
//! and fencing are the reentrant lock's scripts and rules, and a release announces on the
//! semaphore's channel, which wakes one waiter of this process. The fencing counter is the one
//! a lock of the same name uses; each slot's tokens rise strictly from holder to holder.

use std::sync::Arc;

use crate::config::{MARKER_KEY, SEMAPHORE_OWNER};
use crate::error::{Error, NodeOutcome, Op};
use crate::lease::{Calls, Granted, Kind, Lease, LeaseInner, Renewing, Restore, Shared};
use crate::quorum::{Cmd, Limits, Request, Round};
use crate::resp::Reply;
use crate::script::Script;
use crate::slot::key_slot;
use crate::token;
use crate::ttl::Ttl;

use super::{Attempt, cluster_key, counter, decide, fence_key, granted_checked, reentrant};

/// A **semaphore** acquisition on one node. `KEYS[1]` the semaphore's hash, `KEYS[2]` its
/// fencing counter, `KEYS[3]` (optional) the node's restart-quarantine marker, checked as
/// [`ACQUIRE`](crate::scripts::ACQUIRE) does; `ARGV[1]` the new hold's id (the lease's token), `ARGV[2]` its TTL in ms,
/// `ARGV[3]` the permit count P, `ARGV[4]` a slot `s` (0 to P − 1), `ARGV[5]` "1" for a fenced
/// acquisition, `ARGV[6]` the semaphore owner tag, `ARGV[7]` "1" to take slot `s` only.
///
/// The hash: `owner` (the tag), `permits` (P), `since`, and as the reentrant lock one field
/// `hold:<id>` per lease, the server time at which it expires; and `slot:<i>` = the id of the
/// hold that has slot i. Slot i is taken on this node while that hold is live. The key lives
/// until its last hold expires, as a reentrant lock's does, and releasing, extending and
/// renewing a hold are the reentrant scripts' with the owner tag.
///
/// It prunes expired holds (deleting the key when none is left), then refuses with the error
/// `PERMITS <n>` when live holds recorded another count. Otherwise it takes the first free slot
/// from `s` on, wrapping (only `s` with `ARGV[7]`), moving this hold there if it had another
/// slot: it returns `{slot, free, counter}`, where `free` has one character per slot, "1" for
/// each this hold could take (the one it took included), and `counter` is the fencing counter
/// as a decimal string when fenced ("0" when absent), else "". When no slot it may take is
/// free it drops this hold's slot and hold, if it had them, and refuses as [`ACQUIRE`](crate::scripts::ACQUIRE) does:
/// `-2 - ms`, the time until the first taken slot's hold expires.
///
/// Why never more than P valid leases: a lease is one slot `i` granted to its hold by a quorum
/// of nodes (lock::semaphore), and each node gives slot `i` to at most one live hold at a time,
/// for which it keeps the hold's key alive. Two leases valid at once on slot `i` would need a
/// node in both quorums (any two majorities meet) that gave `i` to both at once: impossible, as
/// for the lock. So valid leases have distinct slots. Callers that name the same P have P
/// slots; a caller that names another P is refused by every node that has live holds of the
/// first count, and a valid lease has live holds on a quorum, which meets the caller's quorum:
/// all the leases valid at one instant named the same P.
pub const SEMAPHORE_ACQUIRE: &str = concat!(
    crate::script::reentrant_lua!(),
    "if #KEYS > 2 and redis.call('exists', KEYS[3]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end \
local k = KEYS[1] local tok = ARGV[1] local p = tonumber(ARGV[3]) local t = now() \
local ty = redis.call('type', k)['ok'] local f = {} \
if ty == 'hash' then local all = redis.call('hgetall', k) \
for i = 1, #all, 2 do f[all[i]] = all[i + 1] end \
if f['owner'] ~= ARGV[6] then return redis.error_reply('WRONGTYPE not a semaphore') end \
elseif ty ~= 'none' then return redis.error_reply('WRONGTYPE not a semaphore') end \
local live = false local last = t \
for name, v in pairs(f) do if string.sub(name, 1, 5) == 'hold:' then \
local e = tonumber(v) \
if e == nil or e <= t then redis.call('hdel', k, name) f[name] = nil \
else live = true if e > last then last = e end end end end \
if ty == 'hash' and not live then redis.call('del', k) f = {} ty = 'none' end \
if live and f['permits'] ~= ARGV[3] then \
return redis.error_reply('PERMITS ' .. tostring(f['permits'])) end \
local free = {} local mine = nil local soon = nil \
for i = 0, p - 1 do local h = f['slot:' .. i] \
if h == tok then mine = i free[i] = true \
elseif h == nil or f['hold:' .. h] == nil then free[i] = true \
else local e = tonumber(f['hold:' .. h]) if soon == nil or e < soon then soon = e end end end \
local s = tonumber(ARGV[4]) local pick = nil \
if ARGV[7] == '1' then if free[s] then pick = s end \
else for j = 0, p - 1 do local i = (s + j) % p if free[i] then pick = i break end end end \
if mine ~= nil and mine ~= pick then redis.call('hdel', k, 'slot:' .. mine) end \
if pick == nil then \
if f['hold:' .. tok] then redis.call('hdel', k, 'hold:' .. tok) end \
if soon == nil then return -1 end return -2 - (soon - t) end \
local e = t + tonumber(ARGV[2]) \
if ty == 'none' then \
redis.call('hset', k, 'owner', ARGV[6], 'permits', ARGV[3], 'since', string.format('%d', t)) end \
redis.call('hset', k, 'slot:' .. pick, tok, 'hold:' .. tok, string.format('%d', e)) \
if e > last then last = e end \
redis.call('pexpire', k, last - t) \
local map = {} for i = 0, p - 1 do map[i + 1] = free[i] and '1' or '0' end \
local c = '' if ARGV[5] == '1' then c = redis.call('get', KEYS[2]) or '0' end \
return {pick, table.concat(map), c}"
);

/// [`SEMAPHORE_ACQUIRE`], for calls.
pub(crate) static SEMAPHORE_ACQUIRE_SCRIPT: Script = Script::new(SEMAPHORE_ACQUIRE);

/// A node's grant: the slot it gave, the slots it could have given ('1' each), its counter.
struct Grant<'r> {
    slot: u32,
    free: &'r [u8],
    counter: &'r [u8],
}

/// Reads a granting reply `{slot, free, counter}` for a semaphore of `permits` slots.
fn grant(reply: &Reply, permits: u32) -> Option<Grant<'_>> {
    let Reply::Array(items) = reply else {
        return None;
    };
    match items.as_slice() {
        [Reply::Int(slot), Reply::Bulk(free), Reply::Bulk(c)]
            if (0..i64::from(permits)).contains(slot)
                && free.len() == permits as usize
                && free.get(*slot as usize) == Some(&b'1') =>
        {
            Some(Grant {
                slot: *slot as u32,
                free,
                counter: c,
            })
        }
        _ => None,
    }
}

/// The count another caller recorded, from a `PERMITS <n>` refusal.
fn recorded(reply: &Reply) -> Option<&str> {
    match reply {
        Reply::Error { code, text } if code == "PERMITS" => {
            Some(text.strip_prefix("PERMITS ").unwrap_or(text))
        }
        _ => None,
    }
}

/// What node `i`'s reply means: granted (any slot), refused (no free slot, or another count
/// recorded), or as the other acquisition scripts.
fn judge(reply: &Reply, permits: u32, fenced: bool) -> NodeOutcome {
    match grant(reply, permits) {
        Some(g) if !fenced || counter(&Reply::Bulk(g.counter.to_vec())).is_some() => {
            NodeOutcome::Success
        }
        Some(_) => NodeOutcome::Protocol(format!("unexpected reply: {}", reply.describe())),
        None if recorded(reply).is_some() => NodeOutcome::Rejected,
        None => match reply {
            Reply::Array(_) => {
                NodeOutcome::Protocol(format!("unexpected reply: {}", reply.describe()))
            }
            other => granted_checked(other),
        },
    }
}

/// One attempt at a semaphore.
struct Sem<'a> {
    sh: &'a Arc<Shared>,
    key: &'a [u8],
    fence_key: Vec<u8>,
    permits: u32,
    ttl: Ttl,
    ttl_ms: crate::ttl::Px,
    token: String,
    fenced: bool,
}

impl Sem<'_> {
    /// One round of the acquisition script: any free slot from `slot` on, or `slot` only.
    fn round(&self, slot: u32, only: bool) -> Result<Round, Error> {
        let (cmd, eval) = self.call(slot, only);
        let req = Request {
            cmd: Cmd::Same(&cmd),
            fallback: Some(&eval),
            combine: None,
            slot: Some(key_slot(self.key)),
            slots: None,
            split: None,
            grants: true,
            // The script reads the semaphore's hash, one field per slot.
            work: self.permits as usize,
        };
        let limits = Limits::quorum(self.sh.budget.acquire_bound(self.ttl.duration()));
        let (p, fenced) = (self.permits, self.fenced);
        self.sh
            .cluster
            .round(&req, &|_, r: &Reply| judge(r, p, fenced), limits)
    }

    fn call(&self, slot: u32, only: bool) -> (Vec<u8>, Vec<u8>) {
        let permits = self.permits.to_string();
        let slot = slot.to_string();
        let args: [&[u8]; 7] = [
            self.token.as_bytes(),
            &self.ttl_ms,
            permits.as_bytes(),
            slot.as_bytes(),
            if self.fenced { b"1" } else { b"0" },
            SEMAPHORE_OWNER,
            if only { b"1" } else { b"0" },
        ];
        if self.sh.cfg.restart_quarantine {
            SEMAPHORE_ACQUIRE_SCRIPT.calls(&[self.key, &self.fence_key, MARKER_KEY], &args)
        } else {
            SEMAPHORE_ACQUIRE_SCRIPT.calls(&[self.key, &self.fence_key], &args)
        }
    }

    /// The first round from a random slot on, and a second for the best slot when the nodes
    /// split: the slot this attempt goes for, and the round that decides it (whose start is
    /// the first round's).
    fn pick_slot(&self) -> Result<(u32, Round), Error> {
        let permits = self.permits;
        let from = token::uniform_inclusive(u64::from(permits) - 1)? as u32;
        let first = self.round(from, false)?;
        let q = self.sh.cluster.quorum();
        let mut votes = vec![0usize; permits as usize];
        for r in first.replies.iter().flatten() {
            if let Some(g) = grant(r, permits) {
                votes[g.slot as usize] += 1;
            }
        }
        if let Some(slot) = (0..permits).find(|s| votes[*s as usize] >= q) {
            return Ok((slot, first));
        }
        // Split, or refused. A second round only when a slot could still reach a quorum: free
        // on enough of the nodes that answered, counting those that did not.
        let unheard = first.replies.iter().filter(|r| r.is_none()).count();
        match best_slot(&first, permits, from) {
            Some((slot, n)) if n + unheard >= q && first.successes() > 0 => {
                let mut second = self.round(slot, true)?;
                second.start = first.start;
                Ok((slot, second))
            }
            _ => Ok((from, first)),
        }
    }

    /// Removes this attempt's hold (and with it its slot) on the nodes `to` selects, without
    /// announcing anything and without waiting.
    fn discard(&self, to: &dyn Fn(usize) -> bool) {
        let (sha, eval) = reentrant::discard_hold(self.key, &self.token, SEMAPHORE_OWNER);
        self.sh.cluster.detach(
            &sha,
            Some(&eval),
            (self.permits as usize, Some(key_slot(self.key))),
            to,
        );
    }

    /// On the nodes `to` selects, moves this attempt's hold to `slot` or drops it: what a node
    /// that answered late, or gave another slot, is sent once the slot is chosen.
    fn settle(&self, slot: u32, to: &dyn Fn(usize) -> bool) {
        let (sha, eval) = self.call(slot, true);
        self.sh.cluster.detach(
            &sha,
            Some(&eval),
            (self.permits as usize, Some(key_slot(self.key))),
            to,
        );
    }
}

/// The slot most of the granting nodes could give (ties: the first from `from` on), and on how
/// many nodes it is free or already ours.
fn best_slot(round: &Round, permits: u32, from: u32) -> Option<(u32, usize)> {
    let mut support = vec![0usize; permits as usize];
    for r in round.replies.iter().flatten() {
        if let Some(g) = grant(r, permits) {
            for (i, c) in g.free.iter().enumerate() {
                support[i] += usize::from(*c == b'1');
            }
        }
    }
    (0..permits)
        .map(|j| (from + j) % permits)
        .map(|s| (s, support[s as usize]))
        .filter(|(_, n)| *n > 0)
        .max_by_key(|(s, n)| (*n, std::cmp::Reverse((*s + permits - from) % permits)))
}

/// The round as the decide rule sees it for `slot`: a grant of another slot is no grant.
fn for_slot(mut round: Round, slot: u32, permits: u32) -> Round {
    for (o, r) in round.outcomes.iter_mut().zip(&round.replies) {
        if o.is_success()
            && r.as_ref().and_then(|r| grant(r, permits)).map(|g| g.slot) != Some(slot)
        {
            *o = NodeOutcome::Rejected;
        }
    }
    round
}

/// Whether node `i` answered the round with a refusal (it holds nothing of this attempt).
fn refused(round: &Round, i: usize) -> bool {
    matches!(
        round.replies[i],
        Some(Reply::Int(_)) | Some(Reply::Error { .. })
    ) && round.outcomes[i] == NodeOutcome::Rejected
}

/// One attempt to take a permit of the semaphore `name` (whose hash is `key`) of `permits`
/// slots for `ttl`: a lease, or why not. The arguments are already validated.
pub(crate) fn attempt(
    sh: &Arc<Shared>,
    name: &[u8],
    key: &[u8],
    permits: u32,
    ttl: Ttl,
    fenced: bool,
) -> Result<Lease, Error> {
    cluster_key(sh, key)?;
    let s = Sem {
        sh,
        key,
        fence_key: fence_key(sh, name, key),
        permits,
        ttl,
        ttl_ms: ttl.px(),
        token: token::new_token()?,
        fenced,
    };
    let (slot, round) = s.pick_slot()?;
    let start = round.start;
    if let Some(e) = mismatch(sh, &round, permits) {
        s.discard(&|i| !refused(&round, i));
        return Err(e);
    }
    let refusals: Vec<bool> = (0..round.outcomes.len())
        .map(|i| refused(&round, i))
        .collect();
    let round = for_slot(round, slot, permits);
    let (round, expires) = decide(sh, round, ttl, &|_: &dyn Fn(usize) -> bool| {
        s.discard(&|i| !refusals[i])
    })?;
    // Nodes that gave another slot, or have not answered, may hold one for this hold: move it
    // to the chosen slot there, or drop it.
    s.settle(slot, &|i| {
        matches!(
            round.outcomes[i],
            NodeOutcome::Pending | NodeOutcome::Timeout
        ) || (round.outcomes[i] == NodeOutcome::Rejected && !refusals[i])
    });
    let fencing_token = if fenced {
        match fence(&s, &round, expires) {
            Ok(t) => Some(t),
            Err(e) => {
                s.discard(&|_| true);
                return Err(e);
            }
        }
    } else {
        None
    };
    if round.untrusted.iter().any(|u| *u) {
        s.discard(&|i| round.untrusted[i]);
    }
    let acquisition = sh.cluster.report(Op::Acquire, round.outcomes, None);
    Ok(Lease::new(
        sh,
        Granted {
            resource: name.to_vec(),
            key: key.to_vec(),
            token: s.token,
            kind: Box::new(Permit { slot, permits }),
            fencing_token,
            ttl,
            start,
            expires,
            acquisition,
        },
    ))
}

/// The error for a round refused because nodes recorded another permit count, when enough of
/// them did that no quorum could grant.
fn mismatch(sh: &Shared, round: &Round, permits: u32) -> Option<Error> {
    let counts: Vec<&str> = round
        .replies
        .iter()
        .flatten()
        .filter_map(recorded)
        .collect();
    if counts.len() <= sh.cluster.len() - sh.cluster.quorum() {
        return None;
    }
    Some(Error::invalid(format!(
        "this semaphore has {} permits on {} of {} nodes, and this call named {permits}: \
         every caller of a semaphore must name the same count (a new count applies once no \
         permit of the old one is held)",
        counts[0],
        counts.len(),
        sh.cluster.len()
    )))
}

/// The fencing token, as a reentrant lock's: one more than the largest counter over the
/// granting quorum, written back where the hold still is.
fn fence(s: &Sem<'_>, round: &Round, expires: std::time::Instant) -> Result<u64, Error> {
    let offers = Round {
        start: round.start,
        outcomes: round.outcomes.clone(),
        replies: round
            .replies
            .iter()
            .map(|r| {
                let g = r.as_ref().and_then(|r| grant(r, s.permits))?;
                Some(Reply::Array(vec![
                    Reply::Bulk(g.counter.to_vec()),
                    Reply::Bulk(Vec::new()),
                ]))
            })
            .collect(),
        untrusted: round.untrusted.clone(),
        partial: round.partial.clone(),
    };
    let a = Attempt {
        sh: s.sh,
        ttl: s.ttl,
        key: s.key.to_vec(),
        fence_key: s.fence_key.clone(),
        token: s.token.clone(),
        owner: Some(SEMAPHORE_OWNER),
        shared: false,
        elect: None,
    };
    a.fence(&offers, expires)
}

/// A semaphore's permit: a hold in the semaphore's hash, owned by [`SEMAPHORE_OWNER`], on
/// slot `slot` of `permits`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Permit {
    pub slot: u32,
    pub permits: u32,
}

impl Kind for Permit {
    fn release(&self, l: &LeaseInner) -> Calls {
        reentrant::release_hold(l, SEMAPHORE_OWNER)
    }

    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls {
        reentrant::extend_hold(l, ttl_ms, SEMAPHORE_OWNER)
    }

    fn renewing(&self) -> Renewing<'_> {
        reentrant::renewing_hold(SEMAPHORE_OWNER)
    }

    /// The permit takes its own slot back, where that slot is free.
    fn restore(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Vec<Restore> {
        let fence_key = fence_key(&l.shared, &l.resource, &l.key);
        let (permits, slot) = (self.permits.to_string(), self.slot.to_string());
        let (sha, eval) = SEMAPHORE_ACQUIRE_SCRIPT.calls(
            &[&l.key, &fence_key],
            &[
                l.token.as_bytes(),
                ttl_ms,
                permits.as_bytes(),
                slot.as_bytes(),
                b"0",
                SEMAPHORE_OWNER,
                b"1",
            ],
        );
        vec![(0, sha, Some(eval))]
    }

    fn frees(&self, replies: &[Option<Reply>]) -> bool {
        reentrant::last_hold(replies)
    }

    /// The script reads the semaphore's hash, one field per slot.
    fn work(&self) -> usize {
        self.permits as usize
    }

    fn permit(&self) -> Option<(u32, u32)> {
        Some((self.slot, self.permits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(slot: i64, free: &str, c: &str) -> Reply {
        Reply::Array(vec![
            Reply::Int(slot),
            Reply::Bulk(free.as_bytes().to_vec()),
            Reply::Bulk(c.as_bytes().to_vec()),
        ])
    }

    #[test]
    fn replies_to_the_semaphore_script() {
        assert!(judge(&reply(1, "011", ""), 3, false).is_success());
        assert!(judge(&reply(1, "011", "7"), 3, true).is_success());
        // A fenced grant needs a counter; a slot outside P, a slot not marked free, a map of
        // the wrong length: not grants.
        assert!(!judge(&reply(1, "011", ""), 3, true).is_success());
        for bad in [reply(3, "011", ""), reply(0, "011", ""), reply(1, "01", "")] {
            assert!(matches!(judge(&bad, 3, false), NodeOutcome::Protocol(_)));
        }
        assert_eq!(judge(&Reply::Int(-1002), 3, false), NodeOutcome::Rejected);
        let other = Reply::Error {
            code: "PERMITS".into(),
            text: "PERMITS 4".into(),
        };
        assert_eq!(judge(&other, 3, false), NodeOutcome::Rejected);
        assert_eq!(recorded(&other), Some("4"));
    }

    #[test]
    fn the_second_round_asks_for_the_slot_most_nodes_have_free() {
        let round = |replies: Vec<Option<Reply>>| Round {
            start: std::time::Instant::now(),
            outcomes: replies
                .iter()
                .map(|r| match r {
                    Some(r) if grant(r, 4).is_some() => NodeOutcome::Success,
                    Some(_) => NodeOutcome::Rejected,
                    None => NodeOutcome::Pending,
                })
                .collect(),
            untrusted: vec![false; replies.len()],
            partial: vec![false; replies.len()],
            replies,
        };
        let r = round(vec![
            Some(reply(0, "1010", "")),
            Some(reply(2, "0110", "")),
            Some(reply(1, "0110", "")),
            Some(Reply::Int(-5)),
            None,
        ]);
        // Slot 2 is free on three nodes, slot 1 on two.
        assert_eq!(best_slot(&r, 4, 0), Some((2, 3)));
        let decided = for_slot(r, 2, 4);
        assert_eq!(decided.successes(), 1);
        assert!(refused(&decided, 3));
        assert!(!refused(&decided, 0));
        // Ties go to the first slot from the start.
        let r = round(vec![Some(reply(0, "1100", "")), Some(reply(1, "1100", ""))]);
        assert_eq!(best_slot(&r, 4, 1), Some((1, 2)));
        assert_eq!(best_slot(&r, 4, 3), Some((0, 2)));
        assert_eq!(best_slot(&round(vec![Some(Reply::Int(-3))]), 4, 0), None);
    }
}
