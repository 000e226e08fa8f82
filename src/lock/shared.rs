//! Shared (read) locks, and the intent an exclusive waiter queues against them.
//!
//! A shared lock is the reentrant lock (reentrant.rs) of the empty owner, which no caller can
//! name: every shared holder adds its own hold to the key's hash, and the key lives until the
//! last hold has been released or has expired. Release, extension, renewal and fencing are the
//! reentrant lock's, unchanged; only the acquisition differs (it also checks the intent). The
//! exclusive side is the plain lock, whose `SET NX` is refused by the hash, and whose key, a
//! string, refuses the shared script in turn: see
//! [`SHARED_ACQUIRE`](crate::scripts::SHARED_ACQUIRE) for why the two exclude each other
//! across the quorum.
//!
//! **Writer preference.** Readers that overlap without end would keep the key alive for ever,
//! and an exclusive waiter would never get in. So an exclusive waiter that was refused queues
//! an *intent* on each node where shared holds refused it
//! ([`INTENT_QUEUE`](crate::scripts::INTENT_QUEUE), sent without waiting, behind the refused
//! attempt): from then on new shared acquisitions wait, the holders already in finish, and the
//! last release wakes the writer. The intent lives at most the remaining TTL of the holds it
//! waits for plus the writer's TTL; each refused attempt renews it, and it is removed when the
//! writer gets the lock, or gives up (which also wakes the readers it held back). A writer
//! that dies leaves it to expire.

use std::sync::Arc;

pub(crate) use crate::config::SHARED_OWNER;
use crate::config::{INTENT_PREFIX, MARKER_KEY};
use crate::lease::{Calls, Kind, LeaseInner, Renewing, Restore, Shared};
use crate::resp::Reply;
use crate::script::Script;
use crate::token;
use crate::ttl::Ttl;

use super::{Attempt, reentrant};

/// A **shared** (read) acquisition. A shared lock is the reentrant lock of the empty owner,
/// which no caller can name (an owner id has 1 to 512 bytes): every shared holder adds its own
/// hold to one hash, the key lives until the last hold has been released or has expired, and
/// release, extension, renewal and fencing are the reentrant scripts'. `KEYS[1]` the lock key,
/// `KEYS[2]` the fencing counter, `KEYS[3]` the resource's *intent* key, `KEYS[4]` (optional)
/// the node's restart-quarantine marker; `ARGV` as [`REENTRANT_ACQUIRE`](crate::scripts::REENTRANT_ACQUIRE) with `ARGV[3]` empty.
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
    crate::script::reentrant_lua!(),
    "if #KEYS > 3 and redis.call('exists', KEYS[4]) == 0 then \
return redis.error_reply('NOMARKER no restart-quarantine marker on this node') end \
local q = redis.call('pttl', KEYS[3]) \
if q ~= -2 then local p = redis.call('pttl', KEYS[1]) \
if q < 0 or p == -1 then return -1 end \
if p > q then q = p end return -2 - q end ",
    crate::script::reentrant_hold!()
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

/// [`SHARED_ACQUIRE`], for calls.
pub(crate) static SHARED_ACQUIRE_SCRIPT: Script = Script::new(SHARED_ACQUIRE);
/// [`INTENT_QUEUE`], for calls.
pub(crate) static INTENT_QUEUE_SCRIPT: Script = Script::new(INTENT_QUEUE);
/// [`INTENT_DROP`], for calls.
pub(crate) static INTENT_DROP_SCRIPT: Script = Script::new(INTENT_DROP);

/// The intent key of a lock key: `redlock-intent:` followed by it (on a manager with a
/// cluster node, the companion in its slot: see `lock::companion`).
pub(crate) fn intent_key(sh: &Shared, key: &[u8]) -> Vec<u8> {
    super::companion(sh, INTENT_PREFIX, key, [INTENT_PREFIX, key].concat())
}

/// The shared acquisition's command (and its `EVAL` fallback) for attempt `a` with the
/// reentrant acquisition's arguments `args`.
pub(super) fn acquire_call(a: &Attempt<'_>, args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    let intent = intent_key(a.sh, &a.key);
    if a.sh.cfg.restart_quarantine {
        SHARED_ACQUIRE_SCRIPT.calls(&[&a.key, &a.fence_key, &intent, MARKER_KEY], args)
    } else {
        SHARED_ACQUIRE_SCRIPT.calls(&[&a.key, &a.fence_key, &intent], args)
    }
}

/// One exclusive acquisition's intent against shared holders of its keys (see the module's
/// comment). Nothing is allocated or sent until the first refusal: a granted first attempt
/// costs nothing more.
pub(crate) struct Intent<'k> {
    keys: &'k [Vec<u8>],
    ttl: Ttl,
    /// The waiter's id, drawn at the first refusal.
    id: Option<String>,
}

impl<'k> Intent<'k> {
    /// The intent of an exclusive acquisition of `keys` for `ttl`; nothing is sent yet.
    pub(crate) fn new(keys: &'k [Vec<u8>], ttl: Ttl) -> Intent<'k> {
        Intent {
            keys,
            ttl,
            id: None,
        }
    }

    /// After a refused attempt: queues (or renews) the intent on every node, without waiting.
    /// Nodes where no shared holds refused the attempt ignore it.
    pub(crate) fn queue(&mut self, sh: &Arc<Shared>) {
        if self.id.is_none() {
            match token::new_token() {
                Ok(t) => self.id = Some(t),
                Err(e) => {
                    log::warn!("redlock: no intent queued against shared holders: {e}");
                    return;
                }
            }
        }
        let id = self.id.as_deref().unwrap_or_default();
        let ttl_ms = &self.ttl.px();
        for key in self.keys {
            let intent = intent_key(sh, key);
            let (sha, eval) = INTENT_QUEUE_SCRIPT.calls(&[key, &intent], &[id.as_bytes(), ttl_ms]);
            let slot = Some(crate::slot::key_slot(key));
            sh.cluster.detach(&sha, Some(&eval), (1, slot), &|_| true);
        }
    }

    /// The acquisition is over: removes the intent wherever it is this one's, without waiting.
    /// `gave_up`: no lock was granted, so the shared waiters it held back are woken.
    pub(crate) fn finish(&self, sh: &Arc<Shared>, gave_up: bool) {
        let Some(id) = &self.id else {
            return;
        };
        let flag: &[u8] = if gave_up { b"1" } else { b"0" };
        for key in self.keys {
            let intent = intent_key(sh, key);
            let (sha, eval) = INTENT_DROP_SCRIPT.calls(&[key, &intent], &[id.as_bytes(), flag]);
            let slot = Some(crate::slot::key_slot(key));
            sh.cluster.detach(&sha, Some(&eval), (1, slot), &|_| true);
        }
    }
}
/// A shared lease: a hold in the hash of the empty owner, released, extended, renewed and
/// restored by the reentrant scripts.
pub(crate) struct SharedHold;

impl Kind for SharedHold {
    fn release(&self, l: &LeaseInner) -> Calls {
        reentrant::release_hold(l, SHARED_OWNER)
    }

    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls {
        reentrant::extend_hold(l, ttl_ms, SHARED_OWNER)
    }

    fn renewing(&self) -> Renewing<'_> {
        reentrant::renewing_hold(SHARED_OWNER)
    }

    fn restore(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Vec<Restore> {
        reentrant::restore_hold(l, ttl_ms, SHARED_OWNER)
    }

    fn frees(&self, replies: &[Option<Reply>]) -> bool {
        reentrant::last_hold(replies)
    }

    fn is_shared(&self) -> bool {
        true
    }
}
