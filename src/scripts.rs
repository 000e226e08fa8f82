//! The Lua scripts run on every node. Each acts only when the key still holds the caller's
//! token, so that a client can never release or extend a lock another client holds.
//!
//! They take the lock key as `KEYS[1]` and the token as `ARGV[1]`, and return 1 when they
//! acted, 0 when the key is absent or holds another token. Extend, renew and the fencing
//! scripts are sent with `EVALSHA` (loaded once per connection during the handshake), with a
//! fallback to `EVAL` when a node answers `NOSCRIPT` (after `SCRIPT FLUSH`, for instance).
//! Release is always sent with `EVAL`: a release whose node answers after the quorum decided
//! could not fall back any more, and a release that never runs leaves the key until its TTL.

/// Deletes the key if it holds `ARGV[1]`.
pub const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
return redis.call('del', KEYS[1]) else return 0 end";

/// Sets the key's TTL to `ARGV[2]` milliseconds if it holds `ARGV[1]`. It never creates a key.
pub const EXTEND: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

/// Renews a batch of locks: `KEYS[i]` with token `ARGV[2i-1]` and TTL `ARGV[2i]` ms. For each
/// key it returns 1 if the key held the token (its TTL is set), 2 if the key was missing and
/// has been restored with the token (the node lost it), 0 if another value is there, and -1
/// if the key holds another type. The caller sends it only for locks it still holds on a
/// quorum, so a restore never recreates an expired or released lock.
pub const RENEW: &str = "local out = {} \
for i = 1, #KEYS do \
local token = ARGV[2 * i - 1] \
local ttl = ARGV[2 * i] \
local v = redis.pcall('get', KEYS[i]) \
if type(v) == 'table' and v.err then out[i] = -1 \
elseif v == token then redis.call('pexpire', KEYS[i], ttl) out[i] = 1 \
elseif v == false then redis.call('set', KEYS[i], token, 'px', ttl) out[i] = 2 \
else out[i] = 0 end \
end \
return out";

/// The first step of a fenced acquisition: `SET KEYS[1] ARGV[1] NX PX ARGV[2]`; if it was
/// set, returns the resource's fencing counter `KEYS[2]` (0 when absent), else -1.
pub const FENCED_ACQUIRE: &str = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
return tonumber(redis.call('get', KEYS[2]) or '0') end \
return -1";

/// The second step: if `KEYS[1]` still holds our token `ARGV[1]`, raises the counter `KEYS[2]`
/// to `ARGV[2]` (never lowers it) and returns 1; else 0.
pub const FENCE_WRITE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
local c = tonumber(redis.call('get', KEYS[2]) or '0') or 0 \
if tonumber(ARGV[2]) > c then redis.call('set', KEYS[2], ARGV[2]) end \
return 1 end \
return 0";

/// The storage side of fencing, for data kept in Redis: a write to the hash `KEYS[1]` that is
/// accepted only with a fencing token `ARGV[1]` larger than every token it has seen. Sets the
/// field `value` to `ARGV[2]` and `fence` to the token, and returns 1; returns 0 (and writes
/// nothing) for a stale token. The same check in SQL:
/// `UPDATE t SET value = $2, fence = $1 WHERE id = $3 AND fence < $1` (0 rows: rejected).
pub const FENCED_STORE_WRITE: &str = "local last = tonumber(redis.call('hget', KEYS[1], 'fence') or '0') or 0 \
if tonumber(ARGV[1]) > last then \
redis.call('hset', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2]) return 1 end \
return 0";

/// All scripts, in the order the handshake loads them.
pub(crate) const ALL: [&str; 5] = [RELEASE, EXTEND, RENEW, FENCED_ACQUIRE, FENCE_WRITE];
