//! The reentrant lock: the mutex with an owner id. The same owner acquires it again at once;
//! it is held until every lease of that owner has been released or has expired.
//!
//! The key is a hash of the owner and one hold per lease (see
//! [`REENTRANT_ACQUIRE`](crate::scripts::REENTRANT_ACQUIRE) for the layout and why holds
//! rather than a count). A lease's hold id is its token. Grants, refusals, the decide rule and
//! the undo of a failed attempt are the plain lock's (mod.rs); only the commands and the
//! replies differ, and the fencing rule:
//!
//! A fenced re-entry keeps the token of the owner's current tenure. Each granting node offers
//! the tenure token it stores (the hash's `fence` field) when its counter has not moved past
//! it, else one more than its counter; the token is the largest offer, written back as a
//! plain fenced grant writes its token. It is strictly greater than every token confirmed for
//! an earlier tenure of another owner: that token reached a quorum's counters, which meets
//! this round's quorum in a node whose offer is above it (another owner can write a counter
//! only while it holds the key, that is, before this owner's hold appeared there, and an offer
//! is never below the counter the node had when the tenure's token was set on it). Within a
//! tenure every lease then reports the same token, so a store that took the outer lease's
//! writes also takes the inner one's, and the outer one's again after the inner one returns.
//! When a node's counter has moved past its stored tenure token (only a lost or restored
//! dataset does that), the re-entry takes a new, larger token, and writes made with the older
//! one are turned away from then on: safe, and reported by the lease's
//! [`fencing_token`](crate::Lease::fencing_token).

use crate::config::MARKER_KEY;
use crate::error::{Error, NodeOutcome};
use crate::lease::{Calls, Kind, LeaseInner, Renewing, Restore, owned_calls};
use crate::quorum::{Cmd, Limits, Request, Round};
use crate::resp::Reply;
use crate::script::Script;

use super::{Attempt, counter, granted_checked, granted_fenced};

/// Reentrant acquisition. `KEYS[1]` the lock key, `KEYS[2]` the fencing counter, `KEYS[3]`
/// (optional) the node's restart-quarantine marker, checked as [`ACQUIRE`](crate::scripts::ACQUIRE) does; `ARGV[1]`
/// the new hold's id, `ARGV[2]` its TTL in ms, `ARGV[3]` the owner, `ARGV[4]` "1" for a fenced
/// acquisition. When the key is absent, it creates it with the owner and `since`, the server
/// time of the tenure's start (read by [`HOLDER`](crate::scripts::HOLDER)). When the key is absent, or is a reentrant
/// lock of the same owner, it adds the hold (expiring `ARGV[2]` ms from now) and sets the key's TTL to the latest expiry of its
/// live holds; it returns 1, or, fenced, `{counter, tenure token or ""}`. Otherwise it refuses
/// with `-2 - PTTL` (or -1 when the key has no TTL), like [`ACQUIRE`](crate::scripts::ACQUIRE); a plain lock's key,
/// which is a string, is always another owner's.
///
/// Why holds and not a count (Redisson's `RLock` keeps owner → count): a count is not
/// idempotent. If a re-entry's increment is lost on some nodes (a reply lost, a node paused),
/// the later decrements delete the key there while the owner still believes it holds the lock,
/// and enough such nodes leave it a minority without knowing. A hold is named by its lease:
/// adding it twice is adding it once, and removing it where it never landed removes nothing,
/// so no message, lost or repeated, ever removes another lease's hold. A node frees the key
/// only when no live hold of any lease is left on it. A re-entry that does not reach a quorum
/// is undone with [`REENTRANT_RELEASE`] wherever it was sent, which removes only its own hold.
pub const REENTRANT_ACQUIRE: &str = concat!(
    crate::script::reentrant_lua!(),
    "if #KEYS > 2 and redis.call('exists', KEYS[3]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end ",
    crate::script::reentrant_hold!()
);

/// Removes the hold `ARGV[1]` from the reentrant lock `KEYS[1]` of owner `ARGV[3]`. When no
/// live hold is left, deletes the key and, if `ARGV[2]` is "1", announces the release as
/// [`RELEASE`](crate::scripts::RELEASE) does (a failed attempt's undo passes "0"), and returns 2; when other holds are
/// left, sets the key's TTL to the latest of theirs and returns 1; returns 0 when the hold was
/// not there (never landed, already removed, expired) or the key is not this owner's. A
/// semaphore's hash ([`SEMAPHORE_ACQUIRE`](crate::scripts::SEMAPHORE_ACQUIRE), which has a `permits` field) frees a permit with
/// every hold it loses: there every release is announced and returns 2.
pub const REENTRANT_RELEASE: &str = concat!(
    crate::script::reentrant_lua!(),
    "local k = KEYS[1] \
if not ours(k, ARGV[3]) or redis.call('hdel', k, 'hold:' .. ARGV[1]) == 0 then return 0 end \
local t = now() \
local sem = redis.call('hexists', k, 'permits') == 1 \
local max = prune(k, t) \
if max == nil then redis.call('del', k) else redis.call('pexpire', k, max - t) end \
if max ~= nil and not sem then return 1 end \
if ARGV[2] == '1' then redis.call('publish', k, ARGV[1]) end return 2"
);

/// Sets the hold `ARGV[1]` of owner `ARGV[3]` on `KEYS[1]` to expire `ARGV[2]` ms from now, and
/// the key's TTL to the latest expiry of its live holds; returns 1. Returns 0, changing
/// nothing, when the hold is not there or has expired, or the key is not this owner's. It
/// never creates a key or a hold.
pub const REENTRANT_EXTEND: &str = concat!(
    crate::script::reentrant_lua!(),
    "local k = KEYS[1] \
if not ours(k, ARGV[3]) then return 0 end \
local t = now() \
local max = prune(k, t) \
if max == nil then redis.call('del', k) return 0 end \
local h = 'hold:' .. ARGV[1] \
if redis.call('hexists', k, h) == 0 then redis.call('pexpire', k, max - t) return 0 end \
local e = t + tonumber(ARGV[2]) \
redis.call('hset', k, h, string.format('%d', e)) \
redis.call('pexpire', k, prune(k, t) - t) return 1"
);

/// Renews a batch of reentrant holds, as [`RENEW`](crate::scripts::RENEW) does plain locks: `KEYS[i]` with hold
/// `ARGV[3i-2]`, TTL `ARGV[3i-1]` ms and owner `ARGV[3i]`. For each it returns 1 if the hold
/// was live (it now expires TTL from now, and the key lives until its latest hold), 2 if the
/// key is missing or is this owner's without this hold (what a restart without persistence
/// leaves), 0 if it is another owner's lock (a plain lock included), and -1 if the key holds a
/// value of another type. It never creates a key or a hold.
pub const REENTRANT_RENEW: &str = concat!(
    crate::script::reentrant_lua!(),
    "local out = {} local t = now() \
for i = 1, #KEYS do \
local k = KEYS[i] local h = 'hold:' .. ARGV[3 * i - 2] \
local ty = redis.call('type', k)['ok'] \
if ty == 'none' then out[i] = 2 \
elseif ty == 'string' then out[i] = 0 \
elseif ty ~= 'hash' then out[i] = -1 \
elseif redis.call('hget', k, 'owner') ~= ARGV[3 * i] then out[i] = 0 \
else \
local max = prune(k, t) \
if max == nil then redis.call('del', k) out[i] = 2 \
elseif redis.call('hexists', k, h) == 0 then redis.call('pexpire', k, max - t) out[i] = 2 \
else redis.call('hset', k, h, string.format('%d', t + tonumber(ARGV[3 * i - 1]))) \
redis.call('pexpire', k, prune(k, t) - t) out[i] = 1 end end \
end \
return out"
);

/// The second step of a fenced reentrant acquisition: if `KEYS[1]` is owner `ARGV[3]`'s and
/// holds the hold `ARGV[1]`, raises the counter `KEYS[2]` and the tenure's token (the hash's
/// `fence` field) to `ARGV[2]` (never lowering either) and returns 1; else 0. Counters are
/// compared exactly, as in [`FENCE_WRITE`](crate::scripts::FENCE_WRITE).
pub const REENTRANT_FENCE_WRITE: &str = concat!(
    crate::script::counter_lua!(),
    crate::script::reentrant_lua!(),
    "local k = KEYS[1] \
if not ours(k, ARGV[3]) or redis.call('hexists', k, 'hold:' .. ARGV[1]) == 0 then return 0 end \
local c = redis.call('get', KEYS[2]) or '0' \
local f = redis.call('hget', k, 'fence') or '0' \
local tok = ARGV[2] \
if not canon(c) or not canon(f) or not canon(tok) then \
return redis.error_reply('ERR the fencing counter is not a decimal number below 2^64') end \
if gt(tok, c) then redis.call('set', KEYS[2], tok) end \
if gt(tok, f) then redis.call('hset', k, 'fence', tok) end \
return 1"
);

/// The storage side of fencing for a **reentrant** lock, whose leases of one tenure share a
/// token ([`REENTRANT_ACQUIRE`]): as [`FENCED_STORE_WRITE`](crate::scripts::FENCED_STORE_WRITE), but a token *equal* to the last
/// one is accepted too (the same tenure writing again: an outer lease after an inner one has
/// returned, or the owner's next acquisition while one of its holds remained, which is the
/// same tenure). Lower tokens are refused. Returns 1 when written, 0 for a stale token. In SQL:
/// `... WHERE id = $3 AND fence <= $1`.
pub const FENCED_STORE_WRITE_REENTRANT: &str = concat!(
    crate::script::counter_lua!(),
    "local last = redis.call('hget', KEYS[1], 'fence') or '0' \
local t = ARGV[1] \
if not canon(t) then return redis.error_reply('ERR a fencing token is a decimal number below 2^64') end \
if not canon(last) then return redis.error_reply('ERR the stored fence is not a decimal number below 2^64') end \
if not gt(last, t) then \
redis.call('hset', KEYS[1], 'fence', t, 'value', ARGV[2]) return 1 end \
return 0"
);

/// [`REENTRANT_ACQUIRE`], for calls.
pub(crate) static REENTRANT_ACQUIRE_SCRIPT: Script = Script::new(REENTRANT_ACQUIRE);
/// [`REENTRANT_RELEASE`], for calls.
pub(crate) static REENTRANT_RELEASE_SCRIPT: Script = Script::new(REENTRANT_RELEASE);
/// [`REENTRANT_EXTEND`], for calls.
pub(crate) static REENTRANT_EXTEND_SCRIPT: Script = Script::new(REENTRANT_EXTEND);
/// [`REENTRANT_RENEW`], for calls.
pub(crate) static REENTRANT_RENEW_SCRIPT: Script = Script::new(REENTRANT_RENEW);
/// [`REENTRANT_FENCE_WRITE`], for calls.
pub(crate) static REENTRANT_FENCE_WRITE_SCRIPT: Script = Script::new(REENTRANT_FENCE_WRITE);

/// What a node's reply to the fenced reentrant acquisition means: granted with
/// `{counter, tenure token or ""}`, else as the plain scripts.
fn granted_fenced_reentrant(reply: &Reply) -> NodeOutcome {
    match reply {
        Reply::Array(items) if items.len() == 2 => match (&items[0], &items[1]) {
            (c @ Reply::Bulk(_), Reply::Bulk(f))
                if counter(c).is_some() && (f.is_empty() || counter(&items[1]).is_some()) =>
            {
                NodeOutcome::Success
            }
            _ => NodeOutcome::Protocol(format!("unexpected reply: {}", reply.describe())),
        },
        other => granted_fenced(other),
    }
}

/// The first round of a reentrant attempt: the reentrant acquisition script on every node
/// (the shared one for a shared attempt, whose owner is empty).
pub(super) fn first_round(a: &Attempt<'_>, owner: &[u8], fenced: bool) -> Result<Round, Error> {
    let ttl_ms = &a.ttl.px();
    let flag: &[u8] = if fenced { b"1" } else { b"0" };
    let args: [&[u8]; 4] = [a.token.as_bytes(), ttl_ms, owner, flag];
    let (cmd, fallback) = if a.shared {
        super::shared::acquire_call(a, &args)
    } else if a.sh.cfg.restart_quarantine {
        REENTRANT_ACQUIRE_SCRIPT.calls(&[&a.key, &a.fence_key, MARKER_KEY], &args)
    } else {
        REENTRANT_ACQUIRE_SCRIPT.calls(&[&a.key, &a.fence_key], &args)
    };
    let req = Request {
        cmd: Cmd::Same(&cmd),
        fallback: Some(&fallback),
        combine: None,
        slot: Some(crate::slot::key_slot(&a.key)),
        slots: None,
        split: None,
        grants: true,
        work: 1,
    };
    let judge = |_: usize, r: &Reply| {
        if fenced {
            granted_fenced_reentrant(r)
        } else {
            granted_checked(r)
        }
    };
    let limits = Limits::quorum(a.sh.budget.acquire_bound(a.ttl.duration()));
    a.sh.cluster.round(&req, &judge, limits)
}

/// One granting node's counter, and its offer for the fencing token (see the module's
/// comment): the tenure token it stores unless its counter has moved past it, else one more
/// than the counter (`None` when the counter is at the top of the range).
pub(super) fn fence_candidate(reply: &Reply) -> (Option<u64>, Option<u64>) {
    let Reply::Array(items) = reply else {
        return (None, None);
    };
    let (Some(c), f) = (
        items.first().and_then(counter),
        items.get(1).and_then(counter),
    ) else {
        return (None, None);
    };
    match f {
        Some(f) if f >= c && f > 0 => (Some(c), Some(f)),
        _ => (Some(c), c.checked_add(1)),
    }
}

/// The second round's command of a fenced reentrant attempt: writes token `t` back.
pub(super) fn fence_write(a: &Attempt<'_>, owner: &[u8], t: &str) -> (Vec<u8>, Vec<u8>) {
    REENTRANT_FENCE_WRITE_SCRIPT.calls(
        &[&a.key, &a.fence_key],
        &[a.token.as_bytes(), t.as_bytes(), owner],
    )
}

/// The undo of a failed attempt: removes this attempt's hold only, without announcing.
pub(super) fn discard(a: &Attempt<'_>, owner: &[u8]) -> Calls {
    discard_hold(&a.key, &a.token, owner)
}

/// Removes hold `token` of `owner` from `key` without announcing (a failed attempt's undo).
pub(crate) fn discard_hold(key: &[u8], token: &str, owner: &[u8]) -> Calls {
    REENTRANT_RELEASE_SCRIPT.calls(&[key], &[token.as_bytes(), b"0", owner])
}

/// A reentrant lock's lease: its hold (named by the token) in the hash of `owner`.
pub(crate) struct Reentrant {
    pub(crate) owner: Vec<u8>,
}

impl Kind for Reentrant {
    fn release(&self, l: &LeaseInner) -> Calls {
        release_hold(l, &self.owner)
    }

    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls {
        extend_hold(l, ttl_ms, &self.owner)
    }

    fn renewing(&self) -> Renewing<'_> {
        renewing_hold(&self.owner)
    }

    fn restore(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Vec<Restore> {
        restore_hold(l, ttl_ms, &self.owner)
    }

    fn frees(&self, replies: &[Option<Reply>]) -> bool {
        last_hold(replies)
    }
}

/// The release of hold `l` of `owner` ([`REENTRANT_RELEASE`], announcing when it was the
/// last), for every kind of lease that is a hold in a hash: reentrant, shared, a permit.
pub(crate) fn release_hold(l: &LeaseInner, owner: &[u8]) -> Calls {
    owned_calls(&REENTRANT_RELEASE_SCRIPT, &[&l.key], l, &[b"1", owner])
}

/// The extension of hold `l` of `owner` to `ttl_ms` ([`REENTRANT_EXTEND`]).
pub(crate) fn extend_hold(l: &LeaseInner, ttl_ms: &[u8], owner: &[u8]) -> Calls {
    owned_calls(&REENTRANT_EXTEND_SCRIPT, &[&l.key], l, &[ttl_ms, owner])
}

/// How a hold of `owner` renews: in the batch of [`REENTRANT_RENEW`].
pub(crate) fn renewing_hold(owner: &[u8]) -> Renewing<'_> {
    Renewing {
        script: &REENTRANT_RENEW_SCRIPT,
        extra: Some(owner),
    }
}

/// Puts hold `l` of `owner` back on a node that lost it: the acquisition script without
/// marker or fencing, which adds the hold where the key is missing or is the owner's, never
/// over another owner's.
pub(crate) fn restore_hold(l: &LeaseInner, ttl_ms: &[u8], owner: &[u8]) -> Vec<Restore> {
    let fence_key = super::fence_key(&l.shared, &l.resource, &l.key);
    let (sha, eval) = REENTRANT_ACQUIRE_SCRIPT.calls(
        &[&l.key, &fence_key],
        &[l.token.as_bytes(), ttl_ms, owner, b"0"],
    );
    vec![(0, sha, Some(eval))]
}

/// Whether a release freed the resource: some node answered 2, no hold left there.
pub(crate) fn last_hold(replies: &[Option<Reply>]) -> bool {
    replies.iter().any(|r| matches!(r, Some(Reply::Int(2))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn replies_to_the_fenced_reentrant_acquisition() {
        let granted = Reply::Array(vec![bulk("7"), bulk("")]);
        assert!(granted_fenced_reentrant(&granted).is_success());
        let tenure = Reply::Array(vec![bulk("7"), bulk("7")]);
        assert!(granted_fenced_reentrant(&tenure).is_success());
        assert_eq!(
            granted_fenced_reentrant(&Reply::Int(-1002)),
            NodeOutcome::Rejected
        );
        for bad in [
            Reply::Array(vec![bulk("x"), bulk("")]),
            Reply::Array(vec![bulk("1"), bulk("01")]),
            Reply::Array(vec![bulk("1")]),
            Reply::Int(1),
        ] {
            assert!(!granted_fenced_reentrant(&bad).is_success(), "{bad:?}");
        }
    }

    #[test]
    fn a_node_offers_the_tenure_token_unless_its_counter_moved_past_it() {
        let r = |c: &str, f: &str| Reply::Array(vec![bulk(c), bulk(f)]);
        // First grant on this node: one more than the counter.
        assert_eq!(fence_candidate(&r("4", "")), (Some(4), Some(5)));
        // The tenure's token, which is the counter the tenure set.
        assert_eq!(fence_candidate(&r("5", "5")), (Some(5), Some(5)));
        // A counter past the stored token (a stale hash): never repeat it, go above.
        assert_eq!(fence_candidate(&r("9", "5")), (Some(9), Some(10)));
        assert_eq!(
            fence_candidate(&r("18446744073709551615", "")),
            (Some(u64::MAX), None)
        );
        assert_eq!(
            fence_candidate(&r("18446744073709551615", "18446744073709551615")),
            (Some(u64::MAX), Some(u64::MAX))
        );
        assert_eq!(fence_candidate(&Reply::Int(1)), (None, None));
    }
}
