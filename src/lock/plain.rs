//! The plain mutex's scripts: release, the undo of a failed attempt, extension, batched
//! renewal, and the acquisition scripts (the plain acquisition itself pipelines commands with
//! no script; see `lock::acquire_reply`). The attempt and its decide rule are in `lock/mod.rs`.

use crate::lease::{Calls, Kind, LeaseInner, Renewing, owned_calls};
use crate::script::Script;

/// Deletes the key if it holds `ARGV[1]`, and then announces on the channel named after the key
/// (`PUBLISH KEYS[1] ARGV[1]`, the released token) that the resource is free, which wakes the
/// waiters subscribed to it (see `notify`). Returns 1 when it deleted the key, else 0 (and
/// publishes nothing). Channels are global to the server, not per database: a waiter on
/// another database with the same resource name is woken for nothing, and simply tries again.
pub const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
redis.call('del', KEYS[1]) redis.call('publish', KEYS[1], ARGV[1]) return 1 \
else return 0 end";

/// Deletes the key if it holds `ARGV[1]`, without announcing anything: what a failed
/// acquisition sends to take back the grants it got. (Announcing those would wake the waiters
/// of other processes for a lock that is still held, whose failed attempts would announce
/// theirs in turn.) Returns 1 when it deleted the key, else 0.
pub const DISCARD: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
return redis.call('del', KEYS[1]) else return 0 end";

/// Sets the key's TTL to `ARGV[2]` milliseconds if it holds `ARGV[1]`. It never creates a key.
pub const EXTEND: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

/// Renews a batch of locks: `KEYS[i]` with token `ARGV[2i-1]` and TTL `ARGV[2i]` ms. For each
/// key it returns 1 if the key held the token (its TTL is set), 2 if the key is missing, 0 if
/// another value is there, and -1 if the key holds another type. It never creates a key: a
/// node that lost one gets it back only from the client, and only when a quorum confirmed the
/// key still ours in the same round (see renew.rs), so a lock that a majority lost is never
/// re-created.
pub const RENEW: &str = "local out = {} \
for i = 1, #KEYS do \
local token = ARGV[2 * i - 1] \
local ttl = ARGV[2 * i] \
local v = redis.pcall('get', KEYS[i]) \
if type(v) == 'table' and v.err then out[i] = -1 \
elseif v == token then redis.call('pexpire', KEYS[i], ttl) out[i] = 1 \
elseif v == false then out[i] = 2 \
else out[i] = 0 end \
end \
return out";

/// A plain acquisition: `SET KEYS[1] ARGV[1] NX PX ARGV[2]`, under restart quarantine only if
/// the node's marker `KEYS[2]` exists (without a second key, no marker is checked). Returns 1
/// when set; when the key is held, `-2 - PTTL` (the holder's remaining milliseconds, so -2
/// and below), or 0 when the key has no TTL; and the error `NOMARKER` when the marker is
/// missing. The remaining time tells a waiter how long it may sleep at most (a holder that
/// dies never releases).
///
/// The marker is written only while the node is trusted, and only a lost keyspace removes it
/// (a restart without it, `FLUSHALL`, a failover to a replica that lacked it). Checking it in
/// the same script as the grant means a node never grants after losing the keys it held: not
/// for a manager that trusted it before the loss, and not in the instant between a check and
/// a grant.
///
/// The library no longer sends this script (nor loads it in the handshake): a plain
/// acquisition pipelines `SET NX PX`, `PTTL` and `EXISTS` of the marker in one write and reads
/// their replies back as this script's one reply, with a marker check at least as strong
/// (`EXISTS` after the `SET`; see `lock::acquire_reply`). It stays the reference for those
/// replies, and public API.
pub const ACQUIRE: &str = "if #KEYS > 1 and redis.call('exists', KEYS[2]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end \
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end \
local t = redis.call('pttl', KEYS[1]) \
if t < 0 then return 0 end \
return -2 - t";

/// The first step of a fenced acquisition: `SET KEYS[1] ARGV[1] NX PX ARGV[2]`; if it was
/// set, returns the resource's fencing counter `KEYS[2]` as a decimal string ("0" when absent),
/// else, as [`ACQUIRE`], `-2 - PTTL` (or -1 when the key has no TTL). With a third key, the node's marker, it first checks the marker as [`ACQUIRE`]
/// does. The counter travels as a string, never as a Lua number (a double, which would round
/// it beyond 2^53).
pub const FENCED_ACQUIRE: &str = "if #KEYS > 2 and redis.call('exists', KEYS[3]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end \
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
return redis.call('get', KEYS[2]) or '0' end \
local t = redis.call('pttl', KEYS[1]) \
if t < 0 then return -1 end \
return -2 - t";

/// The second step: if `KEYS[1]` still holds our token `ARGV[1]`, raises the counter `KEYS[2]`
/// to `ARGV[2]` (never lowers it) and returns 1; else 0. Counters are canonical decimal strings
/// compared exactly over the whole 64-bit range, where Lua's doubles would round beyond 2^53;
/// a counter key holding anything else is an error, and is left as it is.
pub const FENCE_WRITE: &str = concat!(
    crate::script::counter_lua!(),
    "if redis.call('get', KEYS[1]) == ARGV[1] then \
local c = redis.call('get', KEYS[2]) or '0' \
local t = ARGV[2] \
if not canon(c) or not canon(t) then \
return redis.error_reply('ERR the fencing counter is not a decimal number below 2^64') end \
if gt(t, c) then redis.call('set', KEYS[2], t) end \
return 1 end \
return 0"
);

/// The storage side of fencing, for data kept in Redis: a write to the hash `KEYS[1]` that is
/// accepted only with a fencing token `ARGV[1]` larger than every token it has seen. Sets the
/// field `value` to `ARGV[2]` and `fence` to the token, and returns 1; returns 0 (and writes
/// nothing) for a stale token. Tokens are decimal strings (no sign, no leading zero, below
/// 2^64), compared exactly; any other token is an error, and writes nothing. The same check in
/// SQL, with a `NUMERIC` or unsigned 64-bit column: `UPDATE t SET value = $2, fence = $1 WHERE
/// id = $3 AND fence < $1` (0 rows: rejected).
pub const FENCED_STORE_WRITE: &str = concat!(
    crate::script::counter_lua!(),
    "local last = redis.call('hget', KEYS[1], 'fence') or '0' \
local t = ARGV[1] \
if not canon(t) then return redis.error_reply('ERR a fencing token is a decimal number below 2^64') end \
if not canon(last) then return redis.error_reply('ERR the stored fence is not a decimal number below 2^64') end \
if gt(t, last) then \
redis.call('hset', KEYS[1], 'fence', t, 'value', ARGV[2]) return 1 end \
return 0"
);

/// [`RELEASE`], for calls.
pub(crate) static RELEASE_SCRIPT: Script = Script::new(RELEASE);
/// [`DISCARD`], for calls.
pub(crate) static DISCARD_SCRIPT: Script = Script::new(DISCARD);
/// [`EXTEND`], for calls.
pub(crate) static EXTEND_SCRIPT: Script = Script::new(EXTEND);
/// [`RENEW`], for calls.
pub(crate) static RENEW_SCRIPT: Script = Script::new(RENEW);
/// [`FENCED_ACQUIRE`], for calls.
pub(crate) static FENCED_ACQUIRE_SCRIPT: Script = Script::new(FENCED_ACQUIRE);
/// [`FENCE_WRITE`], for calls.
pub(crate) static FENCE_WRITE_SCRIPT: Script = Script::new(FENCE_WRITE);

/// A plain lock's lease: the key holds its value, compared by [`RELEASE`], [`EXTEND`] and
/// [`RENEW`].
pub(crate) struct Plain;

impl Kind for Plain {
    fn release(&self, l: &LeaseInner) -> Calls {
        owned_calls(&RELEASE_SCRIPT, &[&l.key], l, &[])
    }

    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls {
        owned_calls(&EXTEND_SCRIPT, &[&l.key], l, &[ttl_ms])
    }

    fn renewing(&self) -> Renewing<'_> {
        Renewing {
            script: &RENEW_SCRIPT,
            extra: None,
        }
    }
}
