//! Leader election over the quorum: leadership is a fenced lease on the election's key, whose
//! fencing token is the **term**, and a record of the leader (its token, term and value) that
//! anyone can read from a quorum.
//!
//! - **Campaign**: the fenced mutex's two rounds ([`attempt`]). The first sets the election key
//!   `NX` and reads the fencing counter; the second, [`ELECT_WRITE`], raises the counter to the
//!   term (one more than the largest counter of the granting quorum), writes the leader record
//!   and announces the term on the record's channel, where the key still holds our token. The
//!   leadership counts once a quorum has confirmed the second round before the validity ends:
//!   the fenced lock's rule, so terms strictly increase across leaders exactly as fencing
//!   tokens do (a new leader's granting quorum meets the last leader's confirming quorum in a
//!   node whose counter holds that term).
//! - **Resign**: the plain release ([`RELEASE`](crate::scripts::RELEASE)), which announces the
//!   release on the key's channel: waiting candidates are woken by it.
//! - **Renewal**: the plain lock's, so a leadership is renewed and lost as any lease is.
//! - **Proclaim**: [`PROCLAIM`] changes the record's value where the key and the record still
//!   hold our token, with a sequence number that only rises, so that a reader keeps the newest
//!   value it meets.
//! - **Leader**: [`LEADER_READ`] on every node, decided by [`decide_leader`]: a leader is a
//!   token that a quorum of nodes holds in the key *and* in the record. A reader never reports
//!   a leader that a quorum does not hold.
//!
//! The keys of election `E` (whose lock key under the prefix is `L`): the key
//! `redlock-elect:L`, its fencing counter `redlock-fence:redlock-elect:L` and the record
//! `redlock-leader:redlock-elect:L` (a hash: `token`, `term`, `seq`, `value`; no TTL, it is
//! read only where the key holds the same token). On a manager with a cluster node the
//! counter and the record are the key's companions in its slot (`lock::companion`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::LEADER_PREFIX;
use crate::error::{Error, NodeOutcome, Op};
use crate::lease::{Calls, Kind, Lease, LeaseInner, Renewing, Shared, confirmed};
use crate::node::call::thread_waker;
use crate::notify::Cancel;
use crate::quorum::{Cmd, Limits, Request, Until};
use crate::resp::Reply;
use crate::script::Script;
use crate::token;
use crate::ttl::Ttl;

use super::plain::Plain;
use super::{Attempt, companion, decide, fence_key};

/// The second round of a campaign: `KEYS[1]` the election key, `KEYS[2]` its fencing counter,
/// `KEYS[3]` the leader record; `ARGV[1]` the token, `ARGV[2]` the term, `ARGV[3]` the value.
/// If the key still holds the token: raises the counter to the term (never lowers it; as
/// [`FENCE_WRITE`](crate::scripts::FENCE_WRITE)), replaces the record with this leader's
/// (sequence 0), announces the term on the record's channel (`PUBLISH KEYS[3] term`, which
/// wakes observers) and returns 1; else returns 0 and writes nothing.
pub const ELECT_WRITE: &str = concat!(
    crate::script::counter_lua!(),
    "if redis.call('get', KEYS[1]) == ARGV[1] then \
local c = redis.call('get', KEYS[2]) or '0' \
local t = ARGV[2] \
if not canon(c) or not canon(t) then \
return redis.error_reply('ERR the fencing counter is not a decimal number below 2^64') end \
if gt(t, c) then redis.call('set', KEYS[2], t) end \
redis.call('del', KEYS[3]) \
redis.call('hset', KEYS[3], 'token', ARGV[1], 'term', t, 'seq', '0', 'value', ARGV[3]) \
redis.call('publish', KEYS[3], t) \
return 1 end \
return 0"
);

/// A leader's new value: `KEYS[1]` the election key, `KEYS[2]` the leader record; `ARGV[1]`
/// the token, `ARGV[2]` the proclamation's sequence number, `ARGV[3]` the value. Where both
/// the key and the record hold the token, sets the value if the sequence number is above the
/// record's (so proclamations that reach a node out of order leave the newest), announces the
/// term on the record's channel and returns 1; else returns 0.
pub const PROCLAIM: &str = "if redis.call('get', KEYS[1]) == ARGV[1] \
and redis.call('hget', KEYS[2], 'token') == ARGV[1] then \
if tonumber(ARGV[2]) > tonumber(redis.call('hget', KEYS[2], 'seq') or '0') then \
redis.call('hset', KEYS[2], 'seq', ARGV[2], 'value', ARGV[3]) end \
redis.call('publish', KEYS[2], redis.call('hget', KEYS[2], 'term')) \
return 1 end \
return 0";

/// Reads one node's view of an election: `KEYS[1]` the election key, `KEYS[2]` the leader
/// record. Returns `{value, PTTL, token, term, seq, value}`: the key's value (empty when
/// absent) and remaining TTL (-2 when absent), then the record's fields (empty when absent).
/// Read-only.
pub const LEADER_READ: &str = "local v = redis.call('get', KEYS[1]) \
if not v then return {'', -2, '', '', '', ''} end \
local h = redis.call('hmget', KEYS[2], 'token', 'term', 'seq', 'value') \
return {v, redis.call('pttl', KEYS[1]), h[1] or '', h[2] or '', h[3] or '', h[4] or ''}";

/// [`ELECT_WRITE`], for calls.
pub(crate) static ELECT_WRITE_SCRIPT: Script = Script::new(ELECT_WRITE);
/// [`PROCLAIM`], for calls.
pub(crate) static PROCLAIM_SCRIPT: Script = Script::new(PROCLAIM);
/// [`LEADER_READ`], for calls.
pub(crate) static LEADER_READ_SCRIPT: Script = Script::new(LEADER_READ);

/// The longest value a candidate may campaign or proclaim with, in bytes.
pub const MAX_LEADER_VALUE: usize = 64 * 1024;

/// The current leader of an election, as a quorum of nodes holds it
/// ([`Election::leader`](crate::Election::leader)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The leader's term: its leadership's fencing token, strictly greater than every earlier
    /// leader's.
    pub term: u64,
    /// The value it campaigned with, or the latest it proclaimed.
    pub value: Vec<u8>,
    /// How long its leadership stays valid at least, as the nodes' TTLs said when they were
    /// read (less the time the read took and the clock drift allowance), unless it is renewed.
    pub validity: Duration,
    /// The leadership's lock value on the nodes (its token, when and by whom it was taken):
    /// unique to one leadership.
    pub id: Vec<u8>,
}

/// The keys of election key `key`: its fencing counter and its leader record.
pub(crate) fn keys(sh: &Shared, key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let record = companion(sh, LEADER_PREFIX, key, [LEADER_PREFIX, key].concat());
    (fence_key(sh, key, key), record)
}

/// One campaign attempt on election key `key` for `ttl` with `value`: a leadership's lease
/// (whose fencing token is the term), or why not. The input is checked.
pub(crate) fn attempt(
    sh: &Arc<Shared>,
    name: &[u8],
    key: &[u8],
    ttl: Ttl,
    value: &[u8],
) -> Result<Lease, Error> {
    super::cluster_key(sh, key)?;
    let (fence_key, record) = keys(sh, key);
    let a = Attempt {
        sh,
        ttl,
        key: key.to_vec(),
        fence_key,
        token: token::new_value(crate::timing::wall_ms(), sh.cfg.label.as_deref())?,
        owner: None,
        shared: false,
        elect: Some((record, value.to_vec())),
    };
    let round = a.first_round(true)?;
    let (round, expires) = decide(sh, round, ttl, &|to| a.release_on(to))?;
    let hold = LeaderHold {
        record: a.elect.as_ref().map(|e| e.0.clone()).unwrap_or_default(),
        value: Mutex::new(value.to_vec()),
        seq: AtomicU64::new(0),
    };
    a.granted(name, round, expires, true, Box::new(hold))
}

/// A leadership's lease: a plain lock's (released, extended and renewed as one), with the
/// leader record's key and the value last proclaimed.
pub(crate) struct LeaderHold {
    record: Vec<u8>,
    value: Mutex<Vec<u8>>,
    /// The last proclamation's number.
    seq: AtomicU64,
}

impl Kind for LeaderHold {
    fn release(&self, l: &LeaseInner) -> Calls {
        Plain.release(l)
    }

    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls {
        Plain.extend(l, ttl_ms)
    }

    fn renewing(&self) -> Renewing<'_> {
        Plain.renewing()
    }

    fn state(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        Some(self)
    }
}

/// The leadership state of `lease`, if it is a leadership.
fn hold(lease: &Lease) -> Option<&LeaderHold> {
    lease.inner.kind.state()?.downcast_ref::<LeaderHold>()
}

/// The value a leadership last proclaimed (or campaigned with); `None` for another lease.
pub(crate) fn value_of(lease: &Lease) -> Option<Vec<u8>> {
    hold(lease).map(|h| h.value.lock().unwrap_or_else(|p| p.into_inner()).clone())
}

/// Checks a candidate's or leader's value: at most [`MAX_LEADER_VALUE`] bytes.
pub(crate) fn check_value(value: &[u8]) -> Result<(), Error> {
    if value.len() > MAX_LEADER_VALUE {
        return Err(Error::invalid(format!(
            "a leader's value is at most {MAX_LEADER_VALUE} bytes, got {}",
            value.len()
        )));
    }
    Ok(())
}

/// The second round's call for attempt `a` with term `t` (see [`ELECT_WRITE`]).
pub(super) fn fence_write(
    a: &Attempt<'_>,
    (record, value): &(Vec<u8>, Vec<u8>),
    t: &str,
) -> (Vec<u8>, Vec<u8>) {
    ELECT_WRITE_SCRIPT.calls(
        &[&a.key, &a.fence_key, record],
        &[a.token.as_bytes(), t.as_bytes(), value],
    )
}

/// Sets the value of the leadership `lease` to `value`: done when a quorum confirmed it
/// before the validity ended. Invalid input for a lease that is no leadership, or a value
/// over [`MAX_LEADER_VALUE`].
pub(crate) fn proclaim(lease: &Lease, value: &[u8]) -> Result<(), Error> {
    let Some(h) = hold(lease) else {
        return Err(Error::invalid(
            "only a leadership (from a campaign) can proclaim a value; this lease is a lock's",
        ));
    };
    check_value(value)?;
    let record = &h.record;
    let seq = h.seq.fetch_add(1, Ordering::AcqRel) + 1;
    let r = proclaim_round(lease, record, value, seq);
    if r.is_ok() {
        *h.value.lock().unwrap_or_else(|p| p.into_inner()) = value.to_vec();
    }
    r
}

fn proclaim_round(lease: &Lease, record: &[u8], value: &[u8], seq: u64) -> Result<(), Error> {
    let inner = &lease.inner;
    let sh = &inner.shared;
    let start = sh.now();
    let expires = {
        let st = inner.lock_state();
        if let Some(e) = inner.not_held_locally(&st, Op::Proclaim, start) {
            return Err(e);
        }
        inner.expires_at().expect("checked above")
    };
    let seq = seq.to_string();
    let (sha, eval) = PROCLAIM_SCRIPT.calls(
        &[&inner.key, record],
        &[inner.token.as_bytes(), seq.as_bytes(), value],
    );
    let req = Request {
        cmd: Cmd::Same(&sha),
        fallback: Some(&eval),
        combine: None,
        slot: Some(crate::slot::key_slot(&inner.key)),
        slots: None,
        split: None,
        grants: false,
        work: 1,
    };
    let limits = Limits {
        cap: Some(expires),
        ..Limits::quorum(
            sh.budget
                .extend_bound(expires.saturating_duration_since(start)),
        )
    };
    let round = sh
        .cluster
        .round(&req, &|_, r| confirmed(Op::Proclaim, r), limits)?;
    let q = sh.cluster.quorum();
    let still = inner.expires_at().is_some_and(|t| t > sh.now());
    let confirmed = round.successes() >= q;
    if confirmed && still {
        return Ok(());
    }
    let detail =
        confirmed.then(|| "the quorum confirmed only after the validity had ended".to_string());
    let report = sh.cluster.report(Op::Proclaim, round.outcomes, detail);
    if confirmed {
        return Err(Error::NotHeld(report));
    }
    Err(sh.cluster.failure(report, Error::NotHeld))
}

/// One node's view of the election, from a [`LEADER_READ`] reply.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    /// The election key's value (empty: absent) and remaining TTL.
    value: Vec<u8>,
    pttl: i64,
    /// The record: its token, term, sequence number and value (`None`: no record for the
    /// key's token).
    record: Option<(u64, u64, Vec<u8>)>,
}

fn parse_view(r: &Reply) -> Result<View, NodeOutcome> {
    let bad = || NodeOutcome::Protocol(format!("unexpected leader reply: {}", r.describe()));
    let items = match r {
        Reply::Array(items) if items.len() == 6 => items,
        Reply::Error { text, .. } => return Err(NodeOutcome::ServerError(text.clone())),
        _ => return Err(bad()),
    };
    let bulk = |r: &Reply| match r {
        Reply::Bulk(b) => Some(b.clone()),
        _ => None,
    };
    let num = |b: &[u8]| {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
    };
    let (Some(value), Reply::Int(pttl), Some(rec_token), Some(term), Some(seq), Some(rec_value)) = (
        bulk(&items[0]),
        &items[1],
        bulk(&items[2]),
        bulk(&items[3]),
        bulk(&items[4]),
        bulk(&items[5]),
    ) else {
        return Err(bad());
    };
    let record = match (num(&term), num(&seq)) {
        (Some(t), Some(s)) if !value.is_empty() && rec_token == value => Some((t, s, rec_value)),
        _ => None,
    };
    Ok(View {
        value,
        pttl: *pttl,
        record,
    })
}

/// The leader a quorum holds among `views` (one per node that answered), if any: a token
/// held in the key by `quorum` nodes that also hold its record there. Its term is theirs (the
/// largest, should they differ), its value the one with the highest sequence number, and its
/// validity the `quorum`-th longest TTL among them (until then a quorum still holds it).
fn decide_leader(views: &[View], quorum: usize) -> Option<(Vec<u8>, u64, Vec<u8>, Duration)> {
    for first in views.iter().filter(|v| v.record.is_some()) {
        let same: Vec<&View> = views
            .iter()
            .filter(|v| v.value == first.value && v.record.is_some())
            .collect();
        if same.len() < quorum || quorum == 0 {
            continue;
        }
        let records = same.iter().filter_map(|v| v.record.as_ref());
        let term = records.clone().map(|r| r.0).max()?;
        let value = records.max_by_key(|r| r.1).map(|r| r.2.clone())?;
        let mut ttls: Vec<i64> = same.iter().map(|v| v.pttl).collect();
        // Longest first; a key with no TTL (-1) is not one of ours: count it as none left.
        ttls.sort_unstable_by(|a, b| b.cmp(a));
        let ms = u64::try_from(ttls[quorum - 1]).unwrap_or(0);
        return Some((first.value.clone(), term, value, Duration::from_millis(ms)));
    }
    None
}

/// Reads the current leader of the election whose key is `key` from every node: `None` when
/// no leader is held by a quorum (none elected, its leadership over, or a campaign still
/// under way).
pub(crate) fn read(sh: &Shared, key: &[u8]) -> Result<Option<Leader>, Error> {
    read_round(sh, key).map(|r| r.leader)
}

/// What one read of the election found.
struct Read {
    leader: Option<Leader>,
    /// Per node: it answered.
    answered: Vec<bool>,
    /// The largest term any node's record held for the token in its key.
    newest: u64,
}

fn read_round(sh: &Shared, key: &[u8]) -> Result<Read, Error> {
    super::cluster_key(sh, key)?;
    let (_, record) = keys(sh, key);
    let (sha, eval) = LEADER_READ_SCRIPT.calls(&[key, &record], &[]);
    let req = Request {
        cmd: Cmd::Same(&sha),
        fallback: Some(&eval),
        combine: None,
        slot: Some(crate::slot::key_slot(key)),
        slots: None,
        split: None,
        grants: false,
        work: 1,
    };
    let limits = Limits {
        node_timeout: sh.budget.acquire_bound(sh.cfg.max_ttl),
        cap: None,
        until: Until::All,
    };
    let judge = |_: usize, r: &Reply| parse_view(r).map_or_else(|e| e, |_| NodeOutcome::Success);
    let round = sh.cluster.round(&req, &judge, limits)?;
    let views: Vec<View> = (round.replies.iter().zip(&round.outcomes))
        .filter(|(_, o)| o.is_success())
        .filter_map(|(r, _)| r.as_ref().and_then(|r| parse_view(r).ok()))
        .collect();
    let q = sh.cluster.quorum();
    if round.successes() < q {
        let report = sh.cluster.report(Op::Leader, round.outcomes, None);
        return Err(sh.cluster.failure(report, Error::Unavailable));
    }
    let leader = decide_leader(&views, q).and_then(|(id, term, value, ttl)| {
        let validity = sh
            .budget
            .expiry(round.start, ttl)
            .saturating_duration_since(sh.now());
        (!validity.is_zero()).then_some(Leader {
            term,
            value,
            validity,
            id,
        })
    });
    let newest = views
        .iter()
        .filter_map(|v| v.record.as_ref().map(|r| r.0))
        .max();
    Ok(Read {
        leader,
        answered: round.outcomes.iter().map(|o| o.is_success()).collect(),
        newest: newest.unwrap_or(0),
    })
}

/// Waits until the election has a leader whose term is above `after`, and returns it; `None`
/// when `until` comes first. Woken by the nodes' announcements of each new term (on the
/// leader record's channel), never by polling while they can be relied on:
///
/// - the observer subscribes to the channel, then reads the leader from every node;
/// - a new leader's [`ELECT_WRITE`] runs on a quorum of nodes and announces the term on each;
/// - if the read found no newer term anywhere, on a quorum of nodes that had confirmed the
///   subscription before the read *and* answered it, then that quorum meets the new leader's
///   in a node where the write comes after the read, hence after the subscription: its
///   message wakes the observer (and a lost subscriber connection wakes it too).
///
/// Otherwise (a campaign seen half-written, nodes not answering, subscriptions not confirmed)
/// it reads again after a short pause (the retry delay). Errors: [`Error::Cancelled`], and the
/// last read's error when `until` came while the nodes could not be read.
pub(crate) fn wait_change(
    sh: &Shared,
    key: &[u8],
    after: u64,
    until: Instant,
    cancel: Option<&Cancel>,
) -> Result<Option<Leader>, Error> {
    super::cluster_key(sh, key)?;
    let (_, record) = keys(sh, key);
    let waker =
        thread_waker().map_err(|e| Error::Internal(format!("cannot create a wake-up: {e}")))?;
    let reg = sh.listener.register_observer(&record, Arc::clone(&waker));
    if let Err(e) = &reg {
        log::warn!("redlock: cannot start the listener ({e}); observing by reading again");
    }
    let reg = reg.ok();
    let q = sh.cluster.quorum();
    loop {
        if cancel.is_some_and(Cancel::is_fired) {
            return Err(Error::Cancelled);
        }
        let subscribed = reg.as_ref().map_or_else(Vec::new, |r| {
            r.take_notified();
            r.confirmed()
        });
        let read = read_round(sh, key);
        let relied = match &read {
            Ok(Read {
                leader: Some(l), ..
            }) if l.term > after => return read.map(|r| r.leader),
            Ok(r) => {
                let both = (r.answered.iter().zip(&subscribed)).filter(|(a, s)| **a && **s);
                r.newest <= after && both.count() >= q
            }
            Err(Error::Unavailable(_) | Error::NotAcquired(_)) => false,
            Err(_) => return read.map(|r| r.leader),
        };
        let now = sh.now();
        if now >= until {
            return read.map(|_| None);
        }
        let wake = if relied {
            until
        } else {
            until.min(now + sh.cfg.retry_delay)
        };
        let woke = match &reg {
            Some(r) => r.sleep(Some(wake), cancel).map(|_| ()),
            None => {
                let _watch = cancel.map(|c| c.watch(Arc::clone(&waker)));
                crate::mux::sleep(&waker, Some(wake.saturating_duration_since(now))).map(|_| ())
            }
        };
        woke.map_err(|e| Error::Internal(format!("poll failed: {e}")))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(value: &str, pttl: i64, record: Option<(u64, u64, &str)>) -> View {
        View {
            value: value.as_bytes().to_vec(),
            pttl,
            record: record.map(|(t, s, v)| (t, s, v.as_bytes().to_vec())),
        }
    }

    #[test]
    fn a_leader_is_a_token_a_quorum_holds_with_its_record() {
        let a = |pttl, seq, v| view("a", pttl, Some((7, seq, v)));
        // Three of five hold "a" with its record: a leader, with the newest value and the
        // third-longest TTL.
        let views = [
            a(900, 0, "x"),
            a(800, 2, "z"),
            a(700, 1, "y"),
            view("b", 500, None),
            view("", -2, None),
        ];
        let (id, term, value, ttl) = decide_leader(&views, 3).expect("a leader");
        assert_eq!((id, term, value), (b"a".to_vec(), 7, b"z".to_vec()));
        assert_eq!(ttl, Duration::from_millis(700));
        // Only two with the record (the third has the key, not yet the record): none.
        let views = [a(900, 0, "x"), a(800, 0, "x"), view("a", 700, None)];
        assert_eq!(decide_leader(&views, 2).map(|l| l.1), Some(7));
        assert_eq!(decide_leader(&views, 3), None);
        // Two tokens, neither on a quorum: none.
        let views = [a(900, 0, "x"), view("b", 900, Some((8, 0, "b")))];
        assert_eq!(decide_leader(&views, 2), None);
        assert_eq!(decide_leader(&[], 1), None);
    }

    #[test]
    fn a_record_counts_only_for_the_token_in_the_key() {
        let r = |v: &str, tok: &str| {
            Reply::Array(vec![
                Reply::Bulk(v.into()),
                Reply::Int(if v.is_empty() { -2 } else { 1000 }),
                Reply::Bulk(tok.into()),
                Reply::Bulk(b"3".to_vec()),
                Reply::Bulk(b"0".to_vec()),
                Reply::Bulk(b"val".to_vec()),
            ])
        };
        assert_eq!(
            parse_view(&r("t", "t")).unwrap().record,
            Some((3, 0, b"val".to_vec()))
        );
        // A record left by an earlier leader, or no key at all: no record.
        assert_eq!(parse_view(&r("t", "old")).unwrap().record, None);
        assert_eq!(parse_view(&r("", "")).unwrap().record, None);
        assert!(matches!(
            parse_view(&Reply::Int(1)),
            Err(NodeOutcome::Protocol(_))
        ));
        let err = Reply::Error {
            code: "WRONGTYPE".into(),
            text: "WRONGTYPE x".into(),
        };
        assert!(matches!(parse_view(&err), Err(NodeOutcome::ServerError(_))));
    }
}
