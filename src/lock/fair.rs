//! The fair lock: the mutex, granted in arrival order (first come, first served) across
//! processes and nodes, with a wake-up for the next waiter alone.
//!
//! The key is the plain lock's: a fair lock and a plain lock of one resource exclude each other
//! as two plain locks do. Beside it each node keeps a queue, a hash with one entry per waiter:
//! its ticket and when the entry drops out. An attempt is [`FAIR_ACQUIRE`] on every node, which
//! grants only when the key is free and the caller is the lowest live ticket there (or nobody
//! is queued). A refused caller takes a ticket, one more than the largest ticket counter (a
//! key beside each node's queue) a quorum reported, and queues it at once with a second round,
//! which also raises the counters to it: whoever starts after that round has finished meets one of those counters in its
//! own quorum, so its ticket is larger. Ties (waiters that queued at the same time) are broken
//! by the waiter's value, so the order is the same on every node.
//!
//! Every later attempt refreshes the entry, and the acquisition driver makes one at least
//! every fifth of the drop-out time; an entry not refreshed for four fifths of it drops out
//! with the next script that reads the queue. A node that lacks a ticket (it restarted empty,
//! a message was lost) learns it from the waiter's next attempt. A release, or a waiter that
//! gives up while the key is free, publishes on the new head's own channel
//! (`<queue key>:<value>`), which only that waiter subscribes to.
//!
//! [`FAIR_ACQUIRE`]: crate::scripts::FAIR_ACQUIRE

use std::sync::Arc;
use std::time::Duration;

use crate::config::{FAIR_PREFIX, FAIR_TICKETS_PREFIX, MARKER_KEY};
use crate::error::{Error, NodeOutcome};
use crate::lease::{Calls, Kind, Lease, LeaseInner, Renewing, Shared, owned_calls};
use crate::quorum::{Cmd, Limits, Request, Round};
use crate::resp::Reply;
use crate::script::Script;
use crate::token;
use crate::ttl::Ttl;

use super::plain::{EXTEND_SCRIPT, Plain};
use super::{Attempt, cluster_key, companion, counter, decide, fence_key, granted_fenced};

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
/// as [`ACQUIRE`](crate::scripts::ACQUIRE) does; `ARGV[1]` the waiter's lock value (its name in the queue), `ARGV[2]` the
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
    crate::script::counter_lua!(),
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
/// the value, announcing it on the key's channel as [`RELEASE`](crate::scripts::RELEASE) does) or "0" to leave the
/// queue only. Either way the value's entry is removed; when this call deleted the key or the
/// entry, the queue is pruned (`head`), which deletes the queue and its ticket counter when no
/// live entry is left (a waiter that gives up leaves nothing behind, even while the lock is
/// held), and, if the key is free, it announces on the channel of the new head only,
/// `<queue>:<head's value>`: the one waiter whose turn it is. Returns 1 when it deleted the key
/// (release) or the entry (leave), else 0.
pub const FAIR_RELEASE: &str = concat!(
    crate::script::counter_lua!(),
    fair_lua!(),
    "local k, q, me = KEYS[1], KEYS[2], ARGV[1] local r = 0 \
if ARGV[2] == '1' and redis.call('get', k) == me then \
redis.call('del', k) redis.call('publish', k, me) r = 1 end \
local left = redis.call('hdel', q, me) \
if r == 1 or left == 1 then \
local hm = head(q, KEYS[3], now()) \
if hm and redis.call('exists', k) == 0 then redis.call('publish', q .. ':' .. hm, me) end end \
if ARGV[2] == '1' then return r end return left"
);

/// [`FAIR_ACQUIRE`], for calls.
pub(crate) static FAIR_ACQUIRE_SCRIPT: Script = Script::new(FAIR_ACQUIRE);
/// [`FAIR_RELEASE`], for calls.
pub(crate) static FAIR_RELEASE_SCRIPT: Script = Script::new(FAIR_RELEASE);

/// The queue key of a lock key: `redlock-fair:` followed by it.
pub(crate) fn queue_key(key: &[u8]) -> Vec<u8> {
    [FAIR_PREFIX, key].concat()
}

/// The ticket counter of a lock key's queue: `redlock-fair-tickets:` followed by it.
pub(crate) fn tickets_key(key: &[u8]) -> Vec<u8> {
    [FAIR_TICKETS_PREFIX, key].concat()
}

/// A refusal `{-2 - ms or -1, counter}`: the code and the counter.
fn refusal(reply: &Reply) -> Option<(i64, Option<u64>)> {
    match reply {
        Reply::Array(items) => match items.as_slice() {
            [Reply::Int(code), c @ Reply::Bulk(_)] if *code <= -1 => Some((*code, counter(c))),
            _ => None,
        },
        _ => None,
    }
}

/// What node `i`'s reply means: granted (1, or the counter when fenced), refused, or not a
/// reply of this script.
fn judge(reply: &Reply, fenced: bool) -> NodeOutcome {
    match reply {
        Reply::Int(1) if !fenced => NodeOutcome::Success,
        Reply::Bulk(_) if fenced => granted_fenced(reply),
        Reply::Error { text, .. } => NodeOutcome::ServerError(text.clone()),
        r if refusal(r).is_some() => NodeOutcome::Rejected,
        other => NodeOutcome::Protocol(format!("unexpected reply: {}", other.describe())),
    }
}

/// The round as the decide rule reads it: each refusal as the plain script's (`-2 - ms`).
fn as_plain(mut round: Round) -> Round {
    for r in round.replies.iter_mut() {
        if let Some((code, _)) = r.as_ref().and_then(refusal) {
            *r = Some(Reply::Int(code));
        }
    }
    round
}

/// The ticket a round's refusals propose: one more than the largest counter, when a quorum of
/// nodes reported theirs; `None` otherwise (too few answered, or a counter is at `u64::MAX`).
fn proposal(round: &Round, quorum: usize) -> Option<u64> {
    let counters: Vec<Option<u64>> = round
        .replies
        .iter()
        .flatten()
        .filter_map(|r| refusal(r).map(|(_, c)| c))
        .collect();
    if counters.len() < quorum {
        return None;
    }
    let mut max = 0u64;
    for c in counters {
        max = max.max(c?);
    }
    max.checked_add(1)
}

/// One fair acquisition: its value (the key's value when granted, and its name in the queues),
/// and its ticket once it has one.
pub(crate) struct Fair {
    resource: Vec<u8>,
    key: Vec<u8>,
    queue: Vec<u8>,
    tickets: Vec<u8>,
    fence_key: Vec<u8>,
    value: String,
    ticket: Option<u64>,
    /// How long an entry lives on a node unless refreshed: four fifths of the drop-out time.
    life_ms: Vec<u8>,
    /// Whether a refused attempt queues (not for a single attempt).
    queues: bool,
}

impl Fair {
    /// A fair acquisition of `resource` (whose lock key is `key`) with drop-out time `drop_out`;
    /// `queues`: whether a refusal takes a ticket. Nothing is sent.
    pub(crate) fn new(
        sh: &Shared,
        resource: &[u8],
        key: &[u8],
        drop_out: Duration,
        queues: bool,
    ) -> Result<Fair, Error> {
        let life = (drop_out * 4 / 5).as_millis().max(1) as u64;
        cluster_key(sh, key)?;
        Ok(Fair {
            resource: resource.to_vec(),
            key: key.to_vec(),
            queue: companion(sh, FAIR_PREFIX, key, queue_key(key)),
            tickets: companion(sh, FAIR_TICKETS_PREFIX, key, tickets_key(key)),
            fence_key: fence_key(sh, resource, key),
            value: token::new_value(crate::timing::wall_ms(), sh.cfg.label.as_deref())?,
            ticket: None,
            life_ms: life.to_string().into_bytes(),
            queues,
        })
    }

    /// The channel on which the nodes announce this waiter's turn.
    pub(crate) fn channel(&self) -> Vec<u8> {
        [self.queue.as_slice(), b":", self.value.as_bytes()].concat()
    }

    /// One attempt: a round of [`FAIR_ACQUIRE`](crate::scripts::FAIR_ACQUIRE); when it is
    /// refused and this waiter has no ticket yet, it takes one and queues it at once (a second
    /// round, which may grant).
    pub(crate) fn attempt(
        &mut self,
        sh: &Arc<Shared>,
        ttl: Ttl,
        fenced: bool,
    ) -> Result<Lease, Error> {
        let round = self.round(sh, ttl, fenced)?;
        let ticket = match self.ticket {
            None if self.queues => proposal(&round, sh.cluster.quorum()),
            _ => None,
        };
        let r = self.decide(sh, round, ttl, fenced);
        match (r, ticket) {
            (Err(Error::NotAcquired(_)), Some(t)) => {
                self.ticket = Some(t);
                let round = self.round(sh, ttl, fenced)?;
                self.decide(sh, round, ttl, fenced)
            }
            (r, _) => r,
        }
    }

    /// Takes this waiter out of every node's queue, without waiting; where the key is free, the
    /// next waiter is woken. For an acquisition that gave up.
    pub(crate) fn leave(&self, sh: &Shared) {
        if self.ticket.is_none() {
            return;
        }
        let (sha, eval) = FAIR_RELEASE_SCRIPT.calls(
            &[&self.key, &self.queue, &self.tickets],
            &[self.value.as_bytes(), b"0"],
        );
        let slot = Some(crate::slot::key_slot(&self.key));
        sh.cluster.detach(&sha, Some(&eval), (1, slot), &|_| true);
    }

    fn round(&self, sh: &Arc<Shared>, ttl: Ttl, fenced: bool) -> Result<Round, Error> {
        let ttl_ms = &ttl.px();
        let ticket = self.ticket.map(|t| t.to_string()).unwrap_or_default();
        let args: [&[u8]; 5] = [
            self.value.as_bytes(),
            ttl_ms,
            ticket.as_bytes(),
            &self.life_ms,
            if fenced { b"1" } else { b"0" },
        ];
        let (sha, eval) = if sh.cfg.restart_quarantine {
            let keys: [&[u8]; 5] = [
                &self.key,
                &self.fence_key,
                &self.queue,
                &self.tickets,
                MARKER_KEY,
            ];
            FAIR_ACQUIRE_SCRIPT.calls(&keys, &args)
        } else {
            let keys: [&[u8]; 4] = [&self.key, &self.fence_key, &self.queue, &self.tickets];
            FAIR_ACQUIRE_SCRIPT.calls(&keys, &args)
        };
        let req = Request {
            cmd: Cmd::Same(&sha),
            fallback: Some(&eval),
            combine: None,
            slot: Some(crate::slot::key_slot(&self.key)),
            slots: None,
            split: None,
            grants: true,
            work: 1,
        };
        let limits = Limits::quorum(sh.budget.acquire_bound(ttl.duration()));
        sh.cluster
            .round(&req, &|_, r: &Reply| judge(r, fenced), limits)
    }

    /// The mutex's decide rule over one round, then its fencing round; a lease or why not.
    fn decide(
        &self,
        sh: &Arc<Shared>,
        round: Round,
        ttl: Ttl,
        fenced: bool,
    ) -> Result<Lease, Error> {
        let a = Attempt {
            sh,
            ttl,
            key: self.key.clone(),
            fence_key: self.fence_key.clone(),
            token: self.value.clone(),
            owner: None,
            shared: false,
            elect: None,
        };
        let (round, expires) = decide(sh, as_plain(round), ttl, &|to| a.release_on(to))?;
        let fair = FairHold {
            queue: self.queue.clone(),
            tickets: self.tickets.clone(),
            ticket: self.ticket,
        };
        a.granted(&self.resource, round, expires, fenced, Box::new(fair))
    }
}

/// A fair lock's lease: the plain lock's key, plus its queue (and ticket counter) on each
/// node, and the ticket it queued with (none when it was granted with nobody queued).
pub(crate) struct FairHold {
    pub queue: Vec<u8>,
    pub tickets: Vec<u8>,
    pub ticket: Option<u64>,
}

impl Kind for FairHold {
    /// A fair release also takes this lease's entry out of the queue and wakes the next
    /// ticket's waiter (see [`FAIR_RELEASE`]).
    fn release(&self, l: &LeaseInner) -> Calls {
        owned_calls(
            &FAIR_RELEASE_SCRIPT,
            &[&l.key, &self.queue, &self.tickets],
            l,
            &[b"1"],
        )
    }

    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls {
        owned_calls(&EXTEND_SCRIPT, &[&l.key], l, &[ttl_ms])
    }

    fn renewing(&self) -> Renewing<'_> {
        Plain.renewing()
    }

    fn fair_ticket(&self) -> Option<Option<u64>> {
        Some(self.ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: i64, c: &str) -> Reply {
        Reply::Array(vec![Reply::Int(code), Reply::Bulk(c.as_bytes().to_vec())])
    }

    #[test]
    fn replies_to_the_fair_script() {
        assert!(judge(&Reply::Int(1), false).is_success());
        assert!(judge(&Reply::Bulk(b"7".to_vec()), true).is_success());
        assert!(!judge(&Reply::Bulk(b"x".to_vec()), true).is_success());
        assert!(matches!(
            judge(&Reply::Int(1), true),
            NodeOutcome::Protocol(_)
        ));
        assert_eq!(judge(&refused(-1002, "5"), false), NodeOutcome::Rejected);
        assert_eq!(judge(&refused(-1, "0"), true), NodeOutcome::Rejected);
        assert!(matches!(
            judge(&refused(0, "5"), false),
            NodeOutcome::Protocol(_)
        ));
        assert!(matches!(
            judge(&Reply::Int(-5), false),
            NodeOutcome::Protocol(_)
        ));
        assert_eq!(refusal(&refused(-1002, "5")), Some((-1002, Some(5))));
        assert_eq!(refusal(&refused(-2, "05")), Some((-2, None)));
    }

    #[test]
    fn a_ticket_needs_a_quorum_of_counters() {
        let round = |replies: Vec<Option<Reply>>| Round {
            start: std::time::Instant::now(),
            outcomes: replies
                .iter()
                .map(|r| match r {
                    Some(r) => judge(r, false),
                    None => NodeOutcome::Pending,
                })
                .collect(),
            untrusted: vec![false; replies.len()],
            partial: vec![false; replies.len()],
            replies,
        };
        let r = round(vec![
            Some(refused(-5, "3")),
            Some(refused(-5, "9")),
            Some(Reply::Int(1)),
            Some(refused(-2, "4")),
            None,
        ]);
        assert_eq!(proposal(&r, 3), Some(10));
        assert_eq!(proposal(&r, 4), None);
        // A counter that is not a canonical number, or one at the top: no ticket.
        let r = round(vec![Some(refused(-5, "3")), Some(refused(-5, "x"))]);
        assert_eq!(proposal(&r, 2), None);
        let top = u64::MAX.to_string();
        let r = round(vec![Some(refused(-5, &top)), Some(refused(-5, "1"))]);
        assert_eq!(proposal(&r, 2), None);
        // Refusals become the plain script's codes for the decide rule.
        let plain = as_plain(round(vec![Some(refused(-1002, "3")), Some(Reply::Int(1))]));
        assert_eq!(plain.replies[0], Some(Reply::Int(-1002)));
        assert_eq!(plain.replies[1], Some(Reply::Int(1)));
    }
}
