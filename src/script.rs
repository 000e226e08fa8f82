//! A Lua script as the nodes run it: its SHA1 name (computed once) and the `EVALSHA` and
//! `EVAL` forms of a call, and the Lua fragments that several primitives' scripts share (exact
//! comparison of fencing counters, the reentrant hold hash). Each primitive's scripts live in
//! its own file under `lock/`, next to the decide rule that reads their replies; `scripts` is
//! the public catalogue of all of them.

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
pub(crate) use counter_lua;

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
pub(crate) use reentrant_lua;

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
pub(crate) use reentrant_hold;

/// A script and its SHA1 name, computed once.
pub(crate) struct Script {
    src: &'static str,
    sha: std::sync::OnceLock<String>,
}

impl Script {
    pub(crate) const fn new(src: &'static str) -> Script {
        Script {
            src,
            sha: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn sha(&self) -> &str {
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

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "return redis.call('get', KEYS[1]) == ARGV[1]";
    static S: Script = Script::new(SRC);

    #[test]
    fn calls_pack_evalsha_and_eval_with_keys_and_arguments() {
        let (sha, eval) = S.calls(&[b"k"], &[b"t"]);
        let sha_text = String::from_utf8(sha).unwrap();
        assert!(
            sha_text.starts_with("*5\r\n$7\r\nEVALSHA\r\n$40\r\n"),
            "{sha_text}"
        );
        assert!(sha_text.ends_with("$1\r\n1\r\n$1\r\nk\r\n$1\r\nt\r\n"));
        let eval_text = String::from_utf8(eval).unwrap();
        assert!(eval_text.contains(SRC));
        assert_eq!(S.sha(), crate::resp::script_sha(SRC));
    }
}
