//! Several resources at once, all or none: one attempt sets every resource's lock key on each
//! node in one script ([`MULTI_ACQUIRE`](crate::scripts::MULTI_ACQUIRE)), which grants all of
//! them or none there. The lock is held when a quorum of nodes granted all of them and
//! validity is left: the plain lock's decide rule (mod.rs), over the same keys a plain lock of
//! each resource uses, so a multi-resource holder and a plain (or shared) holder of any one of
//! the resources exclude each other. A failed attempt takes its grants back everywhere.
//!
//! No node ever holds a part of the set for a caller, so two callers that name overlapping
//! sets, in any order, never wait for each other's part: no deadlock, whatever the order.
//!
//! **On a cluster node** (`redis+cluster://`) a script touches one slot, so when the keys span
//! several slots the node is written one [`MULTI_ACQUIRE`] per slot, each to the shard that
//! owns the slot, all in the same round (one round trip while the slot map is current; see
//! `quorum::Split`). The node counts as granted only when every one of them granted: the
//! round combines their replies ([`combine_acquire`]) before the decide rule reads them.
//! Where some slots granted and others did not, the node holds a part of the set; the attempt
//! takes that part back at once ([`Round::partial`](crate::quorum::Round)), whatever the
//! step's result, so the result stays all or none per node. Why this cannot deadlock, with
//! callers naming overlapping sets in different orders:
//!
//! - a slot's script never waits: it grants its keys or refuses at once;
//! - an attempt never waits while it holds a part: it writes every slot's script at once,
//!   reads the replies, and a node's part is released in the same step, before the caller
//!   pauses or retries;
//! - so no caller ever waits for a key while holding another: the "hold and wait" condition
//!   of a deadlock never holds, whatever the order of the sets.
//!
//! Two callers can still refuse each other in one step (each got a different slot of the
//! other's set), as two callers split the votes of the nodes in plain Redlock; the random
//! retry pause breaks the tie the same way. A part granted by a shard whose reply came too
//! late for the step is released by the attempt's clean-up like any late grant.
//!
//! The lease covers the set: release and extension run the multi-key scripts
//! ([`MULTI_RELEASE`](crate::scripts::MULTI_RELEASE),
//! [`MULTI_EXTEND`](crate::scripts::MULTI_EXTEND)), and renewal carries each key in the batch
//! (renew.rs), counting the lease renewed on a node only where every key was.

use std::sync::Arc;

use crate::config::MARKER_KEY;
use crate::error::{Error, Op};
use crate::lease::{Calls, Granted, Kind, Lease, LeaseInner, Renewing, Shared, owned_calls};
use crate::quorum::{Cmd, Limits, Part, Request, Split, every};
use crate::resp::Reply;
use crate::script::Script;
use crate::token;
use crate::ttl::Ttl;

use super::plain::Plain;
use super::{decide, granted_checked};

/// All-or-nothing acquisition of several resources on one node: `KEYS[1..n]` the lock keys
/// (`n = ARGV[3]`, no two alike), then optionally the node's restart-quarantine marker,
/// checked as [`ACQUIRE`](crate::scripts::ACQUIRE) does; `ARGV[1]` the token, `ARGV[2]` the TTL in ms. When every key is
/// absent, sets each to the token with that TTL and returns 1; otherwise sets nothing and
/// refuses like [`ACQUIRE`](crate::scripts::ACQUIRE): `-2 - PTTL` with the longest remaining TTL among the keys that
/// are there (the time until all of them are free), or 0 when one of them has no TTL.
///
/// One script, so the keys are taken together or not at all on each node: two callers naming
/// overlapping sets, in any order, never each hold a part and wait for the other's.
pub const MULTI_ACQUIRE: &str = "local n = tonumber(ARGV[3]) \
if #KEYS > n and redis.call('exists', KEYS[n + 1]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end \
local worst = -2 \
for i = 1, n do local p = redis.call('pttl', KEYS[i]) \
if p == -1 then return 0 end if p > worst then worst = p end end \
if worst >= 0 then return -2 - worst end \
for i = 1, n do redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2]) end \
return 1";

/// Releases a multi-resource lease on one node: deletes each key `KEYS[i]` that holds the
/// token `ARGV[1]`, announcing each on its channel when `ARGV[2]` is "1" (a failed attempt's
/// undo passes "0"). Returns 1 when every key held the token, else 0 (the keys that held it
/// are deleted all the same).
pub const MULTI_RELEASE: &str = "local all = 1 \
for i = 1, #KEYS do \
if redis.call('get', KEYS[i]) == ARGV[1] then redis.call('del', KEYS[i]) \
if ARGV[2] == '1' then redis.call('publish', KEYS[i], ARGV[1]) end \
else all = 0 end end \
return all";

/// Extends a multi-resource lease on one node: when every key `KEYS[i]` holds the token
/// `ARGV[1]`, sets each one's TTL to `ARGV[2]` ms and returns 1; otherwise changes nothing and
/// returns 0. It never creates a key.
pub const MULTI_EXTEND: &str = "for i = 1, #KEYS do \
if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end end \
for i = 1, #KEYS do redis.call('pexpire', KEYS[i], ARGV[2]) end \
return 1";

/// [`MULTI_ACQUIRE`], for calls.
pub(crate) static MULTI_ACQUIRE_SCRIPT: Script = Script::new(MULTI_ACQUIRE);
/// [`MULTI_RELEASE`], for calls.
pub(crate) static MULTI_RELEASE_SCRIPT: Script = Script::new(MULTI_RELEASE);
/// [`MULTI_EXTEND`], for calls.
pub(crate) static MULTI_EXTEND_SCRIPT: Script = Script::new(MULTI_EXTEND);

/// One attempt to acquire every resource of `resources` (whose lock keys are `keys`, in the
/// same order, no two alike) for `ttl`: one lease for all of them, or why not. The arguments
/// are already validated.
pub(crate) fn attempt(
    sh: &Arc<Shared>,
    resources: &[Vec<u8>],
    keys: &[Vec<u8>],
    ttl: Ttl,
) -> Result<Lease, Error> {
    let token = token::new_value(crate::timing::wall_ms(), sh.cfg.label.as_deref())?;
    let ttl_ms = &ttl.px();
    let acquire = |keys: &[&[u8]]| {
        let n = keys.len().to_string();
        let mut all = keys.to_vec();
        if sh.cfg.restart_quarantine {
            all.push(MARKER_KEY);
        }
        MULTI_ACQUIRE_SCRIPT.calls(&all, &[token.as_bytes(), ttl_ms, n.as_bytes()])
    };
    let key_slices: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let (cmd, fallback) = acquire(&key_slices);
    // On a cluster node, one script per slot when the keys span several.
    let groups = slot_groups(sh, &key_slices);
    let acquire_parts = parts(&groups, acquire);
    let req = Request {
        cmd: Cmd::Same(&cmd),
        fallback: Some(&fallback),
        combine: None,
        slot: crate::slot::common_slot(key_slices.iter().copied()),
        slots: None,
        split: split(&acquire_parts, combine_acquire),
        grants: true,
        work: keys.len(),
    };
    let limits = Limits::quorum(sh.budget.acquire_bound(ttl.duration()));
    let round = sh
        .cluster
        .round(&req, &|_, r: &Reply| granted_checked(r), limits)?;
    let undo = |to: &dyn Fn(usize) -> bool| {
        let release = |g: &[&[u8]]| MULTI_RELEASE_SCRIPT.calls(g, &[token.as_bytes(), b"0"]);
        let (sha, eval) = release(&key_slices);
        let parts = parts(&groups, release);
        let whole = (sha.as_slice(), Some(eval.as_slice()), req.slot);
        sh.cluster
            .detach_split(whole, split(&parts, every), keys.len(), to);
    };
    // A cluster node that granted some slots of the set and not others: its part back now.
    if round.partial.iter().any(|p| *p) {
        undo(&|i| round.partial[i]);
    }
    let (round, expires) = decide(sh, round, ttl, &undo)?;
    // Grants from quarantined nodes did not count: take them back at once.
    if round.untrusted.iter().any(|u| *u) {
        undo(&|i| round.untrusted[i]);
    }
    let acquisition = sh.cluster.report(Op::Acquire, round.outcomes, None);
    Ok(Lease::new(
        sh,
        Granted {
            resource: resources[0].clone(),
            key: keys[0].clone(),
            token,
            kind: Box::new(Many {
                resources: resources.to_vec(),
                keys: keys.to_vec(),
            }),
            fencing_token: None,
            ttl,
            start: round.start,
            expires,
            acquisition,
        },
    ))
}

/// `keys` by slot, when a cluster node must get them one slot at a time: the manager has a
/// cluster node and they span several slots. Empty otherwise.
fn slot_groups<'k>(sh: &Shared, keys: &[&'k [u8]]) -> Vec<(u16, Vec<&'k [u8]>)> {
    if !sh.cluster.has_shards() {
        return Vec::new();
    }
    let groups = crate::slot::by_slot(keys.iter().copied());
    if groups.len() > 1 { groups } else { Vec::new() }
}

/// One part per slot group, its call made by `calls` from the group's keys.
fn parts(groups: &[(u16, Vec<&[u8]>)], calls: impl Fn(&[&[u8]]) -> Calls) -> Vec<Part> {
    (groups.iter())
        .map(|(slot, keys)| {
            let (cmd, eval) = calls(keys);
            Part {
                slot: *slot,
                cmd,
                fallback: Some(eval),
            }
        })
        .collect()
}

/// The split of a request into `parts` (none when there are none), combined by `combine`.
fn split(parts: &[Part], combine: fn(&[Reply]) -> Reply) -> Option<Split<'_>> {
    (!parts.is_empty()).then_some(Split { parts, combine })
}

/// The one reply a cluster node's per-slot [`MULTI_ACQUIRE`] replies stand for, as the script
/// over every key would have answered: an error if one of them is one (the first); else 1
/// when every slot granted; else a refusal: 0 if a key has no TTL, otherwise `-2 - PTTL`
/// with the longest remaining TTL among them. Anything else is passed on for the judge.
pub(crate) fn combine_acquire(replies: &[Reply]) -> Reply {
    if let Some(odd) = replies.iter().find(|r| !matches!(r, Reply::Int(_))) {
        return odd.clone();
    }
    let ints = replies.iter().filter_map(|r| match r {
        Reply::Int(n) => Some(*n),
        _ => None,
    });
    if ints.clone().all(|n| n == 1) {
        Reply::Int(1)
    } else if ints.clone().any(|n| n == 0) {
        Reply::Int(0)
    } else {
        Reply::Int(ints.filter(|n| *n < 0).min().unwrap_or(0))
    }
}

/// A lease over several resources: all of them and their lock keys, in the caller's order.
pub(crate) struct Many {
    pub resources: Vec<Vec<u8>>,
    pub keys: Vec<Vec<u8>>,
}

impl Many {
    fn key_slices(&self) -> Vec<&[u8]> {
        self.keys.iter().map(Vec::as_slice).collect()
    }
}

impl Kind for Many {
    fn release(&self, l: &LeaseInner) -> Calls {
        owned_calls(&MULTI_RELEASE_SCRIPT, &self.key_slices(), l, &[b"1"])
    }

    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls {
        owned_calls(&MULTI_EXTEND_SCRIPT, &self.key_slices(), l, &[ttl_ms])
    }

    /// On a cluster node, one release per slot when the keys span several.
    fn release_parts(&self, l: &LeaseInner) -> Vec<Part> {
        let groups = slot_groups(&l.shared, &self.key_slices());
        parts(&groups, |g| {
            owned_calls(&MULTI_RELEASE_SCRIPT, g, l, &[b"1"])
        })
    }

    /// On a cluster node, one extension per slot when the keys span several.
    fn extend_parts(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Vec<Part> {
        let groups = slot_groups(&l.shared, &self.key_slices());
        parts(&groups, |g| {
            owned_calls(&MULTI_EXTEND_SCRIPT, g, l, &[ttl_ms])
        })
    }

    /// Each key renews as a plain lock's, consecutive in the batch.
    fn renewing(&self) -> Renewing<'_> {
        Plain.renewing()
    }

    fn keys<'a>(&'a self, _: &'a LeaseInner) -> Vec<&'a [u8]> {
        self.key_slices()
    }

    fn resources<'a>(&'a self, _: &'a LeaseInner) -> Vec<&'a [u8]> {
        self.resources.iter().map(Vec::as_slice).collect()
    }

    /// Each resource's key.
    fn work(&self) -> usize {
        self.keys.len()
    }
}
