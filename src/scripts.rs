//! The Lua scripts run on every node. Each acts only when the key still holds the caller's
//! token, so that a client can never release or extend a lock another client holds.
//!
//! They take the lock key as `KEYS[1]` and the token as `ARGV[1]`, and return 1 when they
//! acted, 0 when the key is absent or holds another token. Every script is sent with
//! `EVALSHA` (loaded once per connection during the handshake), so a node never hashes the
//! script's text per call. A node that answers `NOSCRIPT` (after `SCRIPT FLUSH`, for
//! instance) gets the `EVAL` form once, from whoever reads that reply on the node's
//! connection, even after the caller decided at quorum and returned (see `node::link`). The
//! one case this cannot cover: a process that exits between a release's return and the late
//! `NOSCRIPT` of a node whose script cache was flushed leaves that one key until its TTL, as a
//! release lost on the network would.

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

/// Lua for exact comparison of fencing counters, which travel and are stored as canonical
/// decimal strings (no sign, no leading zero, at most `u64::MAX`). `canon(s)` tells whether `s`
/// is one; `gt(a, b)` whether `a > b`, by length first, then as two halves of
/// at most 10 digits each, which Lua's numbers (doubles) hold exactly. Never a string `<`
/// (which compares by the server's locale) and never a whole counter as a number (which rounds
/// beyond 2^53).
macro_rules! counter_lua {
    () => {
        "local function gt(a, b) \
if #a ~= #b then return #a > #b end \
local n = #a \
if n <= 15 then return tonumber(a) > tonumber(b) end \
local ha, hb = tonumber(string.sub(a, 1, n - 10)), tonumber(string.sub(b, 1, n - 10)) \
if ha ~= hb then return ha > hb end \
return tonumber(string.sub(a, n - 9)) > tonumber(string.sub(b, n - 9)) end \
local function canon(s) \
return type(s) == 'string' and #s <= 20 and (s == '0' or string.find(s, '^[1-9]%d*$') ~= nil) \
and not gt(s, '18446744073709551615') end "
    };
}

/// The second step: if `KEYS[1]` still holds our token `ARGV[1]`, raises the counter `KEYS[2]`
/// to `ARGV[2]` (never lowers it) and returns 1; else 0. Counters are canonical decimal strings
/// compared exactly over the whole 64-bit range, where Lua's doubles would round beyond 2^53;
/// a counter key holding anything else is an error, and is left as it is.
pub const FENCE_WRITE: &str = concat!(
    counter_lua!(),
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
    counter_lua!(),
    "local last = redis.call('hget', KEYS[1], 'fence') or '0' \
local t = ARGV[1] \
if not canon(t) then return redis.error_reply('ERR a fencing token is a decimal number below 2^64') end \
if not canon(last) then return redis.error_reply('ERR the stored fence is not a decimal number below 2^64') end \
if gt(t, last) then \
redis.call('hset', KEYS[1], 'fence', t, 'value', ARGV[2]) return 1 end \
return 0"
);

/// Lua shared by the reentrant scripts. A reentrant lock key is a hash: `owner` holds the owner
/// id, `fence` (when fenced) the fencing token of the owner's current tenure, and one field
/// `hold:<id>` per lease, whose value is the server time in milliseconds at which that hold
/// expires. `now()` is that server time; `prune(k, now)` deletes the holds of `k` that have
/// expired and returns the latest expiry of those left (nil if none); `ours(k, owner)` tells
/// whether `k` is a reentrant lock of `owner`. Times are whole milliseconds well below 2^53, so
/// Lua's doubles hold them exactly, and they are written with `%d`, never in exponent form.
macro_rules! reentrant_lua {
    () => {
        "local function now() local t = redis.call('time') \
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end \
local function prune(k, t) \
local all = redis.call('hgetall', k) local max = nil \
for i = 1, #all, 2 do \
if string.sub(all[i], 1, 5) == 'hold:' then \
local e = tonumber(all[i + 1]) \
if e == nil or e <= t then redis.call('hdel', k, all[i]) \
elseif max == nil or e > max then max = e end end end \
return max end \
local function ours(k, owner) \
return redis.call('type', k)['ok'] == 'hash' and redis.call('hget', k, 'owner') == owner end "
    };
}

/// The body of [`REENTRANT_ACQUIRE`] after its marker check, shared with [`SHARED_ACQUIRE`]:
/// adds the hold `ARGV[1]` of owner `ARGV[3]` to `KEYS[1]`, or refuses.
macro_rules! reentrant_hold {
    () => {
        "local k = KEYS[1] local t = now() \
if redis.call('exists', k) == 0 then \
redis.call('hset', k, 'owner', ARGV[3], 'since', string.format('%d', t)) \
elseif not ours(k, ARGV[3]) then \
local p = redis.call('pttl', k) if p < 0 then return -1 end return -2 - p end \
redis.call('hset', k, 'hold:' .. ARGV[1], string.format('%d', t + tonumber(ARGV[2]))) \
redis.call('pexpire', k, prune(k, t) - t) \
if ARGV[4] == '1' then return {redis.call('get', KEYS[2]) or '0', redis.call('hget', k, 'fence') or ''} end \
return 1"
    };
}

/// Reentrant acquisition. `KEYS[1]` the lock key, `KEYS[2]` the fencing counter, `KEYS[3]`
/// (optional) the node's restart-quarantine marker, checked as [`ACQUIRE`] does; `ARGV[1]`
/// the new hold's id, `ARGV[2]` its TTL in ms, `ARGV[3]` the owner, `ARGV[4]` "1" for a fenced
/// acquisition. When the key is absent, it creates it with the owner and `since`, the server
/// time of the tenure's start (read by [`HOLDER`]). When the key is absent, or is a reentrant
/// lock of the same owner, it adds the hold (expiring `ARGV[2]` ms from now) and sets the key's TTL to the latest expiry of its
/// live holds; it returns 1, or, fenced, `{counter, tenure token or ""}`. Otherwise it refuses
/// with `-2 - PTTL` (or -1 when the key has no TTL), like [`ACQUIRE`]; a plain lock's key,
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
    reentrant_lua!(),
    "if #KEYS > 2 and redis.call('exists', KEYS[3]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end ",
    reentrant_hold!()
);

/// A **shared** (read) acquisition. A shared lock is the reentrant lock of the empty owner,
/// which no caller can name (an owner id has 1 to 512 bytes): every shared holder adds its own
/// hold to one hash, the key lives until the last hold has been released or has expired, and
/// release, extension, renewal and fencing are the reentrant scripts'. `KEYS[1]` the lock key,
/// `KEYS[2]` the fencing counter, `KEYS[3]` the resource's *intent* key, `KEYS[4]` (optional)
/// the node's restart-quarantine marker; `ARGV` as [`REENTRANT_ACQUIRE`] with `ARGV[3]` empty.
///
/// Refuses, as the acquisition scripts do (`-2 - PTTL`, here the longer of the key's and the
/// intent's), while an exclusive waiter's intent ([`INTENT_QUEUE`]) is on the node: once an
/// exclusive locker waits, new shared holders wait behind it, and the ones already in finish.
///
/// Why shared and exclusive exclude each other across the quorum: a node holds at most one of
/// a string (an exclusive grant, `SET NX`) and a hash of the empty owner (shared holds) under
/// one key, and each script grants only when the key is absent or of its own kind. A shared
/// holder's quorum and an exclusive holder's quorum would have a node in common (any two
/// majorities of N intersect), and that node granted both: impossible. Shared holders
/// together hold no quorum more than one of them does, so any number may overlap.
pub const SHARED_ACQUIRE: &str = concat!(
    reentrant_lua!(),
    "if #KEYS > 3 and redis.call('exists', KEYS[4]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end \
local q = redis.call('pttl', KEYS[3]) \
if q ~= -2 then local p = redis.call('pttl', KEYS[1]) \
if q < 0 or p == -1 then return -1 end \
if p > q then q = p end return -2 - q end ",
    reentrant_hold!()
);

/// An exclusive waiter's **intent**, queued after a refused attempt: if the lock key `KEYS[1]`
/// holds shared holds (a hash of the empty owner), sets the intent key `KEYS[2]` to the
/// waiter's id `ARGV[1]`, unless another waiter's intent is there, to expire `ARGV[2]` ms
/// after the last of those holds; returns 1 when it set or refreshed it, else 0. While it
/// stands, [`SHARED_ACQUIRE`] refuses new shared holds, so a stream of overlapping readers
/// cannot starve the writer. It lives at most as long as the holds it waits for plus the
/// waiter's TTL; each refused attempt of the waiter renews it, and [`INTENT_DROP`] removes it
/// when the waiter gets the lock or gives up.
pub const INTENT_QUEUE: &str = "local k = KEYS[1] \
if redis.call('type', k)['ok'] ~= 'hash' or redis.call('hget', k, 'owner') ~= '' then return 0 end \
local v = redis.call('get', KEYS[2]) \
if v and v ~= ARGV[1] then return 0 end \
local p = redis.call('pttl', k) if p < 0 then p = 0 end \
redis.call('set', KEYS[2], ARGV[1], 'PX', p + tonumber(ARGV[2])) return 1";

/// Removes the intent `KEYS[2]` if it is waiter `ARGV[1]`'s, and if `ARGV[2]` is "1" (a
/// waiter that gave up) announces on the lock key's channel `KEYS[1]`, which wakes the shared
/// waiters that the intent held back. Returns 1 when it removed it, else 0.
pub const INTENT_DROP: &str = "if redis.call('get', KEYS[2]) ~= ARGV[1] then return 0 end \
redis.call('del', KEYS[2]) \
if ARGV[2] == '1' then redis.call('publish', KEYS[1], ARGV[1]) end return 1";

/// All-or-nothing acquisition of several resources on one node: `KEYS[1..n]` the lock keys
/// (`n = ARGV[3]`, no two alike), then optionally the node's restart-quarantine marker,
/// checked as [`ACQUIRE`] does; `ARGV[1]` the token, `ARGV[2]` the TTL in ms. When every key is
/// absent, sets each to the token with that TTL and returns 1; otherwise sets nothing and
/// refuses like [`ACQUIRE`]: `-2 - PTTL` with the longest remaining TTL among the keys that
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

/// A **semaphore** acquisition on one node. `KEYS[1]` the semaphore's hash, `KEYS[2]` its
/// fencing counter, `KEYS[3]` (optional) the node's restart-quarantine marker, checked as
/// [`ACQUIRE`] does; `ARGV[1]` the new hold's id (the lease's token), `ARGV[2]` its TTL in ms,
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
/// free it drops this hold's slot and hold, if it had them, and refuses as [`ACQUIRE`] does:
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
    reentrant_lua!(),
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

/// Lua shared by the fair lock's scripts (lock::fair), after the counter functions. A fair lock's
/// queue is a hash on each node, `redlock-fair:<lock key>`: one field per waiter, named by the
/// waiter's lock value, holding `"<ticket> <expiry>"`, where the expiry is the server time in
/// milliseconds at which the entry drops out unless refreshed. Beside it, the key
/// `redlock-fair-tickets:<lock key>` holds the highest ticket queued there. `now()` is that
/// time.
/// `before(a, b)` compares two byte strings byte by byte (never by the server's locale).
/// `head(q, n, t)` deletes the entries of `q` that have expired at `t`, sets the TTL of `q`
/// and of its ticket counter `n` to the latest expiry left, and returns the head: the member with the lowest ticket (ties: the
/// lower member), and its expiry; nil when no live entry is left, and then it deletes both
/// (with nobody queued there is no order to keep).
macro_rules! fair_lua {
    () => {
        "local function now() local t = redis.call('time') \
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end \
local function before(a, b) \
for i = 1, math.min(#a, #b) do local x, y = string.byte(a, i), string.byte(b, i) \
if x ~= y then return x < y end end return #a < #b end \
local function head(q, n, t) local all = redis.call('hgetall', q) \
local ht, hm, he, last = nil, nil, nil, nil \
for i = 1, #all, 2 do \
local tt, e = string.match(all[i + 1], '^(%d+) (%d+)$') \
e = tonumber(e) \
if tt == nil or e == nil or e <= t then redis.call('hdel', q, all[i]) else \
if last == nil or e > last then last = e end \
if ht == nil or gt(ht, tt) or (ht == tt and before(all[i], hm)) then ht, hm, he = tt, all[i], e end end end \
if last ~= nil then redis.call('pexpire', q, last - t) redis.call('pexpire', n, last - t) \
else redis.call('del', q, n) end \
return hm, he end "
    };
}

/// A **fair** acquisition (lock::fair). `KEYS[1]` the lock key, `KEYS[2]` the fencing counter,
/// `KEYS[3]` the queue hash, `KEYS[4]` its ticket counter, `KEYS[5]` (optional) the node's
/// restart-quarantine marker, checked
/// as [`ACQUIRE`] does; `ARGV[1]` the waiter's lock value (its name in the queue), `ARGV[2]` the
/// TTL in ms, `ARGV[3]` its ticket ("" before it has one), `ARGV[4]` the entry's life in ms,
/// `ARGV[5]` "1" for a fenced acquisition.
///
/// With a ticket it first writes (or refreshes) the waiter's entry, to expire `ARGV[4]` ms from
/// now, and raises the ticket counter to the ticket (never lowers it). Then, after dropping expired
/// entries, it grants (`SET KEYS[1] ARGV[1] PX ARGV[2]`) when the key is absent and the waiter
/// is the head of the queue, or the queue is empty; or when the key already holds the waiter's
/// value. It returns 1, or fenced, the fencing counter as a decimal string ("0" when absent).
/// Otherwise it refuses with `{-2 - ms, tickets}`: `ms` the key's remaining TTL, or, when the
/// key is free and another waiter is the head, the time until the head's entry drops out (-1
/// instead when the key has no TTL); `tickets` the ticket counter ("0" when absent), from which a waiter without a ticket proposes one (one more than the largest of a
/// quorum's). Tickets have a counter of their own: raising the fencing counter while a
/// reentrant tenure holds the lock would end that tenure's token.
///
/// Why a queue never stalls the lock on a dead waiter, and never deadlocks: an entry lives only
/// while its waiter refreshes it; a node that lacks a waiter's ticket (it restarted, it missed
/// the message) gets it with that waiter's next attempt; and the order (ticket, then value) is
/// total and the same on every node, so the lowest live waiter is the head on every node that
/// has heard from it. Mutual exclusion is the lock's: the key is the plain lock's, set only
/// where it is absent, and a grant counts only with a quorum.
pub const FAIR_ACQUIRE: &str = concat!(
    counter_lua!(),
    fair_lua!(),
    "if #KEYS > 4 and redis.call('exists', KEYS[5]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end \
local k, q, me, tk = KEYS[1], KEYS[3], ARGV[1], ARGV[3] local t = now() \
local n = redis.call('get', KEYS[4]) or '0' \
if not canon(n) then return redis.error_reply('ERR the ticket counter is not a decimal number below 2^64') end \
if tk ~= '' then \
if not canon(tk) then return redis.error_reply('ERR a ticket is a decimal number below 2^64') end \
redis.call('hset', q, me, tk .. ' ' .. string.format('%d', t + tonumber(ARGV[4]))) \
if gt(tk, n) then redis.call('set', KEYS[4], tk) n = tk end end \
local hm, he = head(q, KEYS[4], t) \
local ty = redis.call('type', k)['ok'] local v = false \
if ty == 'string' then v = redis.call('get', k) end \
if (ty == 'none' and (hm == nil or hm == me)) or v == me then \
redis.call('set', k, me, 'PX', ARGV[2]) \
if ARGV[5] == '1' then return redis.call('get', KEYS[2]) or '0' end return 1 end \
local p = -1 \
if ty ~= 'none' then p = redis.call('pttl', k) else p = he - t end \
if p < 0 then return {-1, n} end \
return {-2 - p, n}"
);

/// Releases a fair lock, or takes a waiter out of the queue. `KEYS[1]` the lock key, `KEYS[2]`
/// the queue, `KEYS[3]` its ticket counter; `ARGV[1]` the lock value, `ARGV[2]` "1" to release (delete the key if it holds
/// the value, announcing it on the key's channel as [`RELEASE`] does) or "0" to leave the
/// queue only. Either way the value's entry is removed; then, if the key is free and this call
/// deleted the key or the entry, it announces on the channel of the new head only,
/// `<queue>:<head's value>`: the one waiter whose turn it is. Returns 1 when it deleted the key
/// (release) or the entry (leave), else 0.
pub const FAIR_RELEASE: &str = concat!(
    counter_lua!(),
    fair_lua!(),
    "local k, q, me = KEYS[1], KEYS[2], ARGV[1] local r = 0 \
if ARGV[2] == '1' and redis.call('get', k) == me then \
redis.call('del', k) redis.call('publish', k, me) r = 1 end \
local left = redis.call('hdel', q, me) \
if (r == 1 or left == 1) and redis.call('exists', k) == 0 then \
local hm = head(q, KEYS[3], now()) \
if hm then redis.call('publish', q .. ':' .. hm, me) end end \
if ARGV[2] == '1' then return r end return left"
);

/// Removes the hold `ARGV[1]` from the reentrant lock `KEYS[1]` of owner `ARGV[3]`. When no
/// live hold is left, deletes the key and, if `ARGV[2]` is "1", announces the release as
/// [`RELEASE`] does (a failed attempt's undo passes "0"), and returns 2; when other holds are
/// left, sets the key's TTL to the latest of theirs and returns 1; returns 0 when the hold was
/// not there (never landed, already removed, expired) or the key is not this owner's. A
/// semaphore's hash ([`SEMAPHORE_ACQUIRE`], which has a `permits` field) frees a permit with
/// every hold it loses: there every release is announced and returns 2.
pub const REENTRANT_RELEASE: &str = concat!(
    reentrant_lua!(),
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
    reentrant_lua!(),
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

/// Renews a batch of reentrant holds, as [`RENEW`] does plain locks: `KEYS[i]` with hold
/// `ARGV[3i-2]`, TTL `ARGV[3i-1]` ms and owner `ARGV[3i]`. For each it returns 1 if the hold
/// was live (it now expires TTL from now, and the key lives until its latest hold), 2 if the
/// key is missing or is this owner's without this hold (what a restart without persistence
/// leaves), 0 if it is another owner's lock (a plain lock included), and -1 if the key holds a
/// value of another type. It never creates a key or a hold.
pub const REENTRANT_RENEW: &str = concat!(
    reentrant_lua!(),
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
/// compared exactly, as in [`FENCE_WRITE`].
pub const REENTRANT_FENCE_WRITE: &str = concat!(
    counter_lua!(),
    reentrant_lua!(),
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
/// token ([`REENTRANT_ACQUIRE`]): as [`FENCED_STORE_WRITE`], but a token *equal* to the last
/// one is accepted too (the same tenure writing again: an outer lease after an inner one has
/// returned, or the owner's next acquisition while one of its holds remained, which is the
/// same tenure). Lower tokens are refused. Returns 1 when written, 0 for a stale token. In SQL:
/// `... WHERE id = $3 AND fence <= $1`.
pub const FENCED_STORE_WRITE_REENTRANT: &str = concat!(
    counter_lua!(),
    "local last = redis.call('hget', KEYS[1], 'fence') or '0' \
local t = ARGV[1] \
if not canon(t) then return redis.error_reply('ERR a fencing token is a decimal number below 2^64') end \
if not canon(last) then return redis.error_reply('ERR the stored fence is not a decimal number below 2^64') end \
if not gt(last, t) then \
redis.call('hset', KEYS[1], 'fence', t, 'value', ARGV[2]) return 1 end \
return 0"
);

/// Inspection (`redlock inspect`, [`Redlock::scan`](crate::Redlock::scan)): one `SCAN` step
/// from cursor `ARGV[1]` over keys matching `ARGV[2]`, `ARGV[3]` keys at a time. Returns the
/// next cursor, then for each key found its name, its `PTTL` and its value if it is a string
/// (nil otherwise). Read-only; not loaded by the handshake (sent as `EVAL`).
pub const SCAN_KEYS: &str = "local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3]) \
local out = {r[1]} \
for _, k in ipairs(r[2]) do \
local v = false \
if redis.call('TYPE', k)['ok'] == 'string' then v = redis.call('GET', k) end \
out[#out + 1] = k \
out[#out + 1] = redis.call('PTTL', k) \
out[#out + 1] = v \
end \
return out";

/// Who holds a resource ([`Redlock::holders`](crate::Redlock::holders)): for the key
/// `KEYS[1]`, returns `{type, value, since, PTTL, now}`: the key's type (`none` when absent);
/// a string's value, or a hash's `owner` field (nil otherwise); a hash's `since` field (nil
/// otherwise); its `PTTL`; and the node's own clock in milliseconds, so that how long the
/// lock has been held is measured on one clock. Read-only; sent as `EVAL`.
pub const HOLDER: &str = "local t = redis.call('time') \
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
local k = KEYS[1] local ty = redis.call('type', k)['ok'] \
local v = false local s = false \
if ty == 'string' then v = redis.call('get', k) \
elseif ty == 'hash' then v = redis.call('hget', k, 'owner') s = redis.call('hget', k, 'since') end \
return {ty, v, s, redis.call('pttl', k), now}";

/// All scripts, in the order the handshake loads them.
pub(crate) const ALL: [&str; 20] = [
    RELEASE,
    DISCARD,
    EXTEND,
    RENEW,
    FENCED_ACQUIRE,
    FENCE_WRITE,
    REENTRANT_ACQUIRE,
    REENTRANT_RELEASE,
    REENTRANT_EXTEND,
    REENTRANT_RENEW,
    REENTRANT_FENCE_WRITE,
    SHARED_ACQUIRE,
    INTENT_QUEUE,
    INTENT_DROP,
    MULTI_ACQUIRE,
    MULTI_RELEASE,
    MULTI_EXTEND,
    SEMAPHORE_ACQUIRE,
    FAIR_ACQUIRE,
    FAIR_RELEASE,
];

/// A script and its SHA1 name, computed once.
pub(crate) struct Script {
    src: &'static str,
    sha: std::sync::OnceLock<String>,
}

impl Script {
    const fn new(src: &'static str) -> Script {
        Script {
            src,
            sha: std::sync::OnceLock::new(),
        }
    }

    fn sha(&self) -> &str {
        self.sha.get_or_init(|| crate::resp::script_sha(self.src))
    }

    /// The `EVALSHA` and `EVAL` forms of a call with these keys and arguments.
    pub(crate) fn calls(&self, keys: &[&[u8]], args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let mut digits = [0u8; 20];
        let nkeys = crate::resp::decimal(keys.len() as u64, &mut digits);
        let mut a: Vec<&[u8]> = Vec::with_capacity(3 + keys.len() + args.len());
        a.extend_from_slice(&[b"EVALSHA", self.sha().as_bytes(), nkeys]);
        a.extend_from_slice(keys);
        a.extend_from_slice(args);
        let mut sha_cmd = Vec::new();
        crate::resp::pack(&a, &mut sha_cmd);
        a[0] = b"EVAL";
        a[1] = self.src.as_bytes();
        let mut eval_cmd = Vec::new();
        crate::resp::pack(&a, &mut eval_cmd);
        (sha_cmd, eval_cmd)
    }
}

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
/// [`SHARED_ACQUIRE`], for calls.
pub(crate) static SHARED_ACQUIRE_SCRIPT: Script = Script::new(SHARED_ACQUIRE);
/// [`INTENT_QUEUE`], for calls.
pub(crate) static INTENT_QUEUE_SCRIPT: Script = Script::new(INTENT_QUEUE);
/// [`INTENT_DROP`], for calls.
pub(crate) static INTENT_DROP_SCRIPT: Script = Script::new(INTENT_DROP);
/// [`MULTI_ACQUIRE`], for calls.
pub(crate) static MULTI_ACQUIRE_SCRIPT: Script = Script::new(MULTI_ACQUIRE);
/// [`MULTI_RELEASE`], for calls.
pub(crate) static MULTI_RELEASE_SCRIPT: Script = Script::new(MULTI_RELEASE);
/// [`MULTI_EXTEND`], for calls.
pub(crate) static MULTI_EXTEND_SCRIPT: Script = Script::new(MULTI_EXTEND);
/// [`SEMAPHORE_ACQUIRE`], for calls.
pub(crate) static SEMAPHORE_ACQUIRE_SCRIPT: Script = Script::new(SEMAPHORE_ACQUIRE);
/// [`FAIR_ACQUIRE`], for calls.
pub(crate) static FAIR_ACQUIRE_SCRIPT: Script = Script::new(FAIR_ACQUIRE);
/// [`FAIR_RELEASE`], for calls.
pub(crate) static FAIR_RELEASE_SCRIPT: Script = Script::new(FAIR_RELEASE);
/// [`SCAN_KEYS`], for calls.
pub(crate) static SCAN_SCRIPT: Script = Script::new(SCAN_KEYS);
/// [`HOLDER`], sent as `EVAL` by `Redlock::holders`.
pub(crate) static HOLDER_SCRIPT: Script = Script::new(HOLDER);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_pack_evalsha_and_eval_with_keys_and_arguments() {
        let (sha, eval) = RELEASE_SCRIPT.calls(&[b"k"], &[b"t"]);
        let sha_text = String::from_utf8(sha).unwrap();
        assert!(
            sha_text.starts_with("*5\r\n$7\r\nEVALSHA\r\n$40\r\n"),
            "{sha_text}"
        );
        assert!(sha_text.ends_with("$1\r\n1\r\n$1\r\nk\r\n$1\r\nt\r\n"));
        let eval_text = String::from_utf8(eval).unwrap();
        assert!(eval_text.contains(RELEASE));
        assert_eq!(RELEASE_SCRIPT.sha(), crate::resp::script_sha(RELEASE));
    }
}
