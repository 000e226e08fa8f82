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
//! The lease covers the set: release and extension run the multi-key scripts
//! ([`MULTI_RELEASE`](crate::scripts::MULTI_RELEASE),
//! [`MULTI_EXTEND`](crate::scripts::MULTI_EXTEND)), and renewal carries each key in the batch
//! (renew.rs), counting the lease renewed on a node only where every key was.

use std::sync::Arc;

use crate::config::MARKER_KEY;
use crate::error::{Error, Op};
use crate::lease::{Calls, Granted, Kind, Lease, LeaseInner, Renewing, Shared, owned_calls};
use crate::quorum::{Cmd, Limits, Request};
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
    let n = keys.len().to_string();
    let mut all: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    if sh.cfg.restart_quarantine {
        all.push(MARKER_KEY);
    }
    let (cmd, fallback) =
        MULTI_ACQUIRE_SCRIPT.calls(&all, &[token.as_bytes(), ttl_ms, n.as_bytes()]);
    let req = Request {
        cmd: Cmd::Same(&cmd),
        fallback: Some(&fallback),
        combine: None,
        // Routed on a cluster node only when every key shares one slot (a hash tag).
        slot: crate::slot::common_slot(keys.iter().map(Vec::as_slice)),
        slots: None,
        grants: true,
        work: keys.len(),
    };
    let limits = Limits::quorum(sh.budget.acquire_bound(ttl.duration()));
    let round = sh
        .cluster
        .round(&req, &|_, r: &Reply| granted_checked(r), limits)?;
    let undo = |to: &dyn Fn(usize) -> bool| {
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let (sha, eval) = MULTI_RELEASE_SCRIPT.calls(&keys, &[token.as_bytes(), b"0"]);
        let slot = crate::slot::common_slot(keys.iter().copied());
        sh.cluster.detach(&sha, Some(&eval), (keys.len(), slot), to);
    };
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
