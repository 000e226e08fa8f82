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
use std::time::Duration;

pub(crate) use crate::config::SHARED_OWNER;
use crate::config::{INTENT_PREFIX, MARKER_KEY};
use crate::lease::Shared;
use crate::scripts::{INTENT_DROP_SCRIPT, INTENT_QUEUE_SCRIPT, SHARED_ACQUIRE_SCRIPT};
use crate::token;

use super::Attempt;

/// The intent key of a lock key: `redlock-intent:` followed by it.
pub(crate) fn intent_key(key: &[u8]) -> Vec<u8> {
    [INTENT_PREFIX, key].concat()
}

/// The shared acquisition's command (and its `EVAL` fallback) for attempt `a` with the
/// reentrant acquisition's arguments `args`.
pub(super) fn acquire_call(a: &Attempt<'_>, args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    let intent = intent_key(&a.key);
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
    ttl: Duration,
    /// The waiter's id, drawn at the first refusal.
    id: Option<String>,
}

impl<'k> Intent<'k> {
    /// The intent of an exclusive acquisition of `keys` for `ttl`; nothing is sent yet.
    pub(crate) fn new(keys: &'k [Vec<u8>], ttl: Duration) -> Intent<'k> {
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
        let ttl_ms = self.ttl.as_millis().to_string();
        for key in self.keys {
            let intent = intent_key(key);
            let (sha, eval) =
                INTENT_QUEUE_SCRIPT.calls(&[key, &intent], &[id.as_bytes(), ttl_ms.as_bytes()]);
            sh.cluster.detach(&sha, Some(&eval), 1, &|_| true);
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
            let intent = intent_key(key);
            let (sha, eval) = INTENT_DROP_SCRIPT.calls(&[key, &intent], &[id.as_bytes(), flag]);
            sh.cluster.detach(&sha, Some(&eval), 1, &|_| true);
        }
    }
}
