//! The Lua scripts run on every node. Each acts only when the key still holds the caller's
//! token, so that a client can never release or extend a lock another client holds.
//!
//! Both take the lock key as `KEYS[1]` and the token as `ARGV[1]`, and return 1 when they acted,
//! 0 when the key is absent or holds another token. They are sent with `EVALSHA` (loaded once
//! per connection during the handshake), with a fallback to `EVAL` when a node answers
//! `NOSCRIPT` (after `SCRIPT FLUSH`, for instance).

/// Deletes the key if it holds `ARGV[1]`.
pub const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
return redis.call('del', KEYS[1]) else return 0 end";

/// Sets the key's TTL to `ARGV[2]` milliseconds if it holds `ARGV[1]`. It never creates a key.
pub const EXTEND: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

/// All scripts, in the order the handshake loads them.
pub(crate) const ALL: [&str; 2] = [RELEASE, EXTEND];
