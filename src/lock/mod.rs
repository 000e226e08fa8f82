//! The mutex: one attempt to acquire an exclusive lock on a resource, plain or fenced.
//!
//! A plain attempt is one round: `SET key token NX PX ttl` on every node (pipelined with the
//! holder's `PTTL` and the restart-quarantine marker's `EXISTS`), granted when a quorum
//! granted it and validity is left (`TTL − elapsed − drift`). A fenced attempt adds a second
//! round that writes the fencing token back to the granting quorum's counters. A failed
//! attempt releases the key everywhere without waiting for the replies.
//!
//! With an owner id the lock is reentrant (reentrant.rs): the same rounds with the reentrant
//! scripts, whose key records one hold per lease.
//!
//! Waiting, retries and auto-renewal are the acquisition driver's (acquire.rs); release and
//! extension are the lease's.

pub(crate) mod election;
pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod plain;
pub(crate) mod reentrant;
pub(crate) mod semaphore;
pub(crate) mod shared;

pub use election::{Leader, MAX_LEADER_VALUE};
pub(crate) use fair::Fair;
pub(crate) use multi::attempt as attempt_many;
pub(crate) use semaphore::attempt as attempt_permit;
pub(crate) use shared::{Intent, SHARED_OWNER};

use std::sync::Arc;
use std::time::Duration;

use crate::config::{FENCE_PREFIX, MARKER_KEY};
use crate::error::{Error, NodeOutcome, Op};
use crate::lease::{Granted, Kind, Lease, Shared, confirmed};
use crate::quorum::{Cmd, Combine, Limits, Request, Round};
use crate::resp::{self, Reply};
use crate::token;
use crate::ttl::Ttl;

use plain::{DISCARD_SCRIPT, FENCE_WRITE_SCRIPT, FENCED_ACQUIRE_SCRIPT, Plain};
use reentrant::Reentrant;
use shared::SharedHold;

/// The fencing counter of a resource: `redlock-fence:` followed by its bytes.
fn fence_key_for(resource: &[u8]) -> Vec<u8> {
    [FENCE_PREFIX, resource].concat()
}

/// A companion key of lock key `key` (its fencing counter, intent, fair queue, …) on this
/// manager: `standalone`, today's name, on a manager of standalone nodes; on one with a
/// cluster node, `prefix` followed by `key` or `{key}`, so that it shares the key's slot
/// (`slot::companion_key`). Where no such name is safe (see [`cluster_key`]) the standalone
/// name is kept, and a cluster node refuses the command (`CROSSSLOT`): every attempt checks
/// its keys with [`cluster_key`] first.
pub(crate) fn companion(sh: &Shared, prefix: &[u8], key: &[u8], standalone: Vec<u8>) -> Vec<u8> {
    if sh.cluster.has_shards() {
        crate::slot::companion_key(prefix, key).unwrap_or(standalone)
    } else {
        standalone
    }
}

/// Checks that `key` can have companion keys in its own slot on this manager (always, on a
/// manager of standalone nodes): invalid input otherwise.
pub(crate) fn cluster_key(sh: &Shared, key: &[u8]) -> Result<(), Error> {
    if sh.cluster.has_shards() && crate::slot::companion_key(b"", key).is_none() {
        return Err(Error::invalid(format!(
            "the lock key {:?} cannot have its companion keys (fencing counter, queue, \
             intent) in its own slot on a cluster node: a key that starts with '{{', or that \
             has no hash tag and contains '}}', is refused on a manager with a cluster node",
            String::from_utf8_lossy(key)
        )));
    }
    Ok(())
}

/// The fencing counter of `resource`, whose lock key is `key`, on this manager (see
/// [`companion`]).
pub(crate) fn fence_key(sh: &Shared, resource: &[u8], key: &[u8]) -> Vec<u8> {
    companion(sh, FENCE_PREFIX, key, fence_key_for(resource))
}

/// What a reply to the acquisition script means, or the plain acquisition's commands'
/// combined reply ([`acquire_reply`]): 1: set; 0 or below: held.
fn granted_checked(reply: &Reply) -> NodeOutcome {
    match reply {
        Reply::Int(1) => NodeOutcome::Success,
        Reply::Int(n) if *n <= 0 => NodeOutcome::Rejected,
        Reply::Error { text, .. } => NodeOutcome::ServerError(text.clone()),
        other => NodeOutcome::Protocol(format!("unexpected reply: {}", other.describe())),
    }
}

/// The reply the [`ACQUIRE`](crate::scripts::ACQUIRE) script would give, from the replies to
/// the plain acquisition's commands, pipelined in one write to a node: `SET key token NX PX
/// ttl`, `PTTL key` and, with restart quarantine, `EXISTS <marker>`. The marker's loss is the
/// error `NOMARKER` (whatever the `SET` did: a failed attempt takes back its grants on every
/// node that did not refuse, and a granted one on every node that answered an error); then
/// any error; then 1 when set, else `-2 - PTTL`, or 0 when the key has no TTL (or is gone
/// already). Anything else is a reply the judge reports as a protocol error.
///
/// Atomicity, against the script's marker-then-`SET` in one step: the node runs the three
/// commands in order, nothing of ours between them. `EXISTS` after the `SET` sees the marker's
/// loss if it happened before the grant, so a grant counts only from a node whose marker was
/// still there after the key was set: a check at least as strong as the script's. `PTTL`
/// after a refused `SET` may see a later state than the refusal (the key released or expired
/// meanwhile: 0, "held, no TTL known"; or someone else's key): it only bounds how long a
/// waiter sleeps, which stays safe.
fn acquire_reply(parts: &[Reply]) -> Reply {
    let (set, pttl, marker) = match parts {
        [set, pttl] => (set, pttl, None),
        [set, pttl, marker] => (set, pttl, Some(marker)),
        _ => return unexpected("acquisition", &Reply::Array(parts.to_vec())),
    };
    if marker == Some(&Reply::Int(0)) {
        return Reply::Error {
            code: "NOMARKER".into(),
            text: "NOMARKER no restart-quarantine marker on this node".into(),
        };
    }
    if let Some(e) = parts.iter().find(|r| matches!(r, Reply::Error { .. })) {
        return e.clone();
    }
    match (marker, set, pttl) {
        (Some(m), _, _) if *m != Reply::Int(1) => unexpected("EXISTS", m),
        (_, Reply::Ok, _) => Reply::Int(1),
        (_, Reply::Nil, Reply::Int(t)) if *t < 0 => Reply::Int(0),
        (_, Reply::Nil, Reply::Int(t)) => Reply::Int(-2 - t),
        (_, Reply::Nil, other) => unexpected("PTTL", other),
        (_, other, _) => unexpected("SET", other),
    }
}

/// A reply no acquisition judge accepts, naming what `command` answered.
fn unexpected(command: &str, reply: &Reply) -> Reply {
    Reply::Status(format!("{command} answered {}", reply.describe()))
}

/// A fencing counter as the fenced acquisition script returns it: a canonical decimal string.
fn counter(reply: &Reply) -> Option<u64> {
    match reply {
        Reply::Bulk(b) if b.len() == 1 || b.first() != Some(&b'0') => {
            std::str::from_utf8(b).ok()?.parse().ok()
        }
        _ => None,
    }
}

/// What a reply to the fenced acquisition script means: the counter when granted.
fn granted_fenced(reply: &Reply) -> NodeOutcome {
    match reply {
        r @ Reply::Bulk(_) if counter(r).is_some() => NodeOutcome::Success,
        Reply::Int(n) if *n <= -1 => NodeOutcome::Rejected,
        Reply::Error { text, .. } => NodeOutcome::ServerError(text.clone()),
        other => NodeOutcome::Protocol(format!("unexpected reply: {}", other.describe())),
    }
}

/// The holder's remaining TTL as an acquisition script's refusal reports it (`-2 - PTTL`).
fn refusal_pttl(reply: &Reply) -> Option<Duration> {
    match reply {
        Reply::Int(n) if *n <= -2 => Some(Duration::from_millis(n.unsigned_abs() - 2)),
        _ => None,
    }
}

/// For a round that got no grant: how long until enough refusing nodes' keys have expired for
/// a quorum of voters to be free (the `need`-th smallest remaining TTL, where `need` is how
/// many refusals stand between the free nodes and a quorum). `None` when the round got a
/// grant, or when too few refusals said how long.
fn held_for(sh: &Shared, round: &Round) -> Option<Duration> {
    if round.successes() > 0 {
        return None;
    }
    let refused = round
        .outcomes
        .iter()
        .filter(|o| **o == NodeOutcome::Rejected)
        .count();
    let mut ttls: Vec<Duration> = round
        .outcomes
        .iter()
        .zip(&round.replies)
        .filter(|(o, _)| **o == NodeOutcome::Rejected)
        .filter_map(|(_, r)| r.as_ref().and_then(refusal_pttl))
        .collect();
    ttls.sort_unstable();
    let free = sh.cluster.voters().saturating_sub(refused);
    let need = sh.cluster.quorum().checked_sub(free)?;
    if need == 0 {
        return None;
    }
    ttls.get(need - 1).copied()
}

/// One attempt at one resource.
struct Attempt<'a> {
    sh: &'a Arc<Shared>,
    ttl: Ttl,
    key: Vec<u8>,
    fence_key: Vec<u8>,
    /// The key's value for a plain lock; the hold's id for a reentrant one.
    token: String,
    /// The owner of a reentrant lock ([`SHARED_OWNER`] for a shared one).
    owner: Option<&'a [u8]>,
    /// A shared acquisition (whose owner is [`SHARED_OWNER`]).
    shared: bool,
    /// A campaign (election.rs): the leader record's key and the candidate's value, which the
    /// fencing round writes with the term.
    elect: Option<(Vec<u8>, Vec<u8>)>,
}

/// One attempt to acquire `resource` (whose lock key is `key`) for `ttl`, reentrant for
/// `owner` if one is given, shared if `shared` (with no owner): a lease, or why not. The
/// arguments are already validated.
///
/// A plain lock's value is its token followed by when and by whom it was taken (see
/// [`token::new_value`]); a reentrant lock's hold is named by the bare token, and its owner
/// and start time are fields of the key's hash.
pub(crate) fn attempt(
    sh: &Arc<Shared>,
    resource: &[u8],
    key: &[u8],
    ttl: Ttl,
    fenced: bool,
    owner: Option<&[u8]>,
    shared: bool,
) -> Result<Lease, Error> {
    let owner = if shared { Some(SHARED_OWNER) } else { owner };
    let token = match owner {
        Some(_) => token::new_token()?,
        None => token::new_value(crate::timing::wall_ms(), sh.cfg.label.as_deref())?,
    };
    if fenced || owner.is_some() {
        cluster_key(sh, key)?;
    }
    let a = Attempt {
        sh,
        ttl,
        key: key.to_vec(),
        fence_key: fence_key(sh, resource, key),
        token,
        owner,
        shared,
        elect: None,
    };
    let round = a.first_round(fenced)?;
    let (round, expires) = decide(sh, round, ttl, &|to| a.release_on(to))?;
    let kind: Box<dyn Kind> = match owner {
        _ if shared => Box::new(SharedHold),
        Some(o) => Box::new(Reentrant { owner: o.to_vec() }),
        None => Box::new(Plain),
    };
    a.granted(resource, round, expires, fenced, kind)
}

/// Takes an attempt's grants back on the nodes a predicate selects, without waiting.
type Undo<'a> = dyn Fn(&dyn Fn(usize) -> bool) + 'a;

/// The decide rule of every acquisition's first round: granted when a quorum granted and
/// validity is left (`TTL − elapsed − drift`), with the instant the validity ends. Otherwise
/// `undo` takes the grants back on every node but those that refused (there the script ran
/// and set nothing of ours, so a release would only cost the node work, which adds up when
/// many waiters attempt at once), and the error says why, with how long the holder has left.
fn decide(
    sh: &Shared,
    round: Round,
    ttl: Ttl,
    undo: &Undo<'_>,
) -> Result<(Round, std::time::Instant), Error> {
    let expires = sh.budget.expiry(round.start, ttl.duration());
    let q = sh.cluster.quorum();
    let granted = round.successes();
    if granted >= q && expires > sh.now() {
        return Ok((round, expires));
    }
    undo(&|i| round.outcomes[i] != NodeOutcome::Rejected);
    let detail = (granted >= q).then(|| {
        format!(
            "validity exhausted: the quorum answered after {} ms of a {} ms TTL",
            sh.now().saturating_duration_since(round.start).as_millis(),
            ttl.duration().as_millis()
        )
    });
    let expires_in = held_for(sh, &round);
    let mut report = sh.cluster.report(Op::Acquire, round.outcomes, detail);
    report.expires_in = expires_in;
    if granted >= q {
        return Err(Error::NotAcquired(report));
    }
    Err(sh.cluster.failure(report, Error::NotAcquired))
}

impl Attempt<'_> {
    /// `SET NX PX` on every node at once: for a plain lock, with `PTTL` (a refusal says how
    /// long the holder has left, which bounds a waiter's sleep) and, unless quarantine is off,
    /// `EXISTS` of the node's restart-quarantine marker, pipelined in one write and read back
    /// as the acquisition script's one reply (see [`acquire_reply`]); for a fenced one, the
    /// fenced acquisition script, which also reads the counter.
    fn first_round(&self, fenced: bool) -> Result<Round, Error> {
        if let Some(owner) = self.owner {
            return reentrant::first_round(self, owner, fenced);
        }
        let ttl_ms = &self.ttl.px();
        let checked = self.sh.cfg.restart_quarantine;
        let args: [&[u8]; 2] = [self.token.as_bytes(), ttl_ms];
        let (cmd, fallback, combine) = if fenced {
            let (sha, eval) = if checked {
                let keys: [&[u8]; 3] = [&self.key, &self.fence_key, MARKER_KEY];
                FENCED_ACQUIRE_SCRIPT.calls(&keys, &args)
            } else {
                FENCED_ACQUIRE_SCRIPT.calls(&[&self.key, &self.fence_key], &args)
            };
            (sha, Some(eval), None)
        } else {
            let mut cmd = Vec::with_capacity(128 + self.key.len() * 2 + self.token.len());
            let set: [&[u8]; 6] = [
                b"SET",
                &self.key,
                self.token.as_bytes(),
                b"NX",
                b"PX",
                ttl_ms,
            ];
            resp::pack(&set, &mut cmd);
            resp::pack(&[b"PTTL", &self.key], &mut cmd);
            if checked {
                resp::pack(&[b"EXISTS", MARKER_KEY], &mut cmd);
            }
            let parts = if checked { 3 } else { 2 };
            let combine = Combine {
                parts,
                f: acquire_reply,
            };
            (cmd, None, Some(combine))
        };
        let req = Request {
            cmd: Cmd::Same(&cmd),
            fallback: fallback.as_deref(),
            combine,
            slot: Some(crate::slot::key_slot(&self.key)),
            slots: None,
            split: None,
            grants: true,
            work: 1,
        };
        let judge = |_: usize, r: &Reply| {
            if fenced {
                granted_fenced(r)
            } else {
                granted_checked(r)
            }
        };
        let limits = Limits::quorum(self.sh.budget.acquire_bound(self.ttl.duration()));
        self.sh.cluster.round(&req, &judge, limits)
    }

    /// The second round of a fenced acquisition: the token is one more than the largest
    /// counter over the granting quorum; it counts once a quorum has written it back (where
    /// the key still holds our token) before the validity ends.
    fn fence(&self, first: &Round, expires: std::time::Instant) -> Result<u64, Error> {
        let sh = self.sh;
        // Each granting node's candidate: one more than its counter (for a reentrant lock,
        // the tenure's token where the node still holds it; see reentrant.rs). Exact in 64
        // bits, and never a repeat: at the top of the range there is no next token, so the
        // grant is refused (delete the counter keys to start over).
        let mut t = 0u64;
        for r in first
            .replies
            .iter()
            .zip(&first.outcomes)
            .filter(|(_, o)| o.is_success())
            .filter_map(|(r, _)| r.as_ref())
        {
            let (c, candidate) = match self.owner {
                Some(_) => reentrant::fence_candidate(r),
                None => (counter(r), counter(r).and_then(|c| c.checked_add(1))),
            };
            match (c, candidate) {
                (_, Some(v)) => t = t.max(v),
                (Some(c), None) => {
                    return Err(Error::Internal(format!(
                        "the fencing counter {} is exhausted (at {c}): no larger token exists",
                        String::from_utf8_lossy(&self.fence_key)
                    )));
                }
                (None, None) => {}
            }
        }
        let t = t.max(1);
        let t_str = t.to_string();
        let (sha, eval) = match (self.owner, &self.elect) {
            (_, Some(e)) => election::fence_write(self, e, &t_str),
            (Some(owner), None) => reentrant::fence_write(self, owner, &t_str),
            (None, None) => FENCE_WRITE_SCRIPT.calls(
                &[&self.key, &self.fence_key],
                &[self.token.as_bytes(), t_str.as_bytes()],
            ),
        };
        let slot = Some(crate::slot::key_slot(&self.key));
        let req = Request {
            cmd: Cmd::Same(&sha),
            fallback: Some(&eval),
            combine: None,
            slot,
            slots: None,
            split: None,
            grants: false,
            work: 1,
        };
        let limits = Limits {
            cap: Some(expires),
            ..Limits::quorum(sh.budget.acquire_bound(self.ttl.duration()))
        };
        let round = sh
            .cluster
            .round(&req, &|_, r| confirmed(Op::Fence, r), limits)?;
        let confirmed = round.successes();
        let q = sh.cluster.quorum();
        if confirmed >= q && expires > sh.now() {
            return Ok(t);
        }
        let granted = first.successes();
        let detail = format!(
            "granted by {granted}, but the fencing token {t} was confirmed by only \
             {confirmed} before the validity ran out"
        );
        let report = sh.cluster.report(Op::Fence, round.outcomes, Some(detail));
        Err(if confirmed >= q {
            Error::NotAcquired(report)
        } else {
            sh.cluster.failure(report, Error::NotAcquired)
        })
    }

    /// The lease for a round the decide rule granted (valid until `expires`), after the
    /// fencing round if `fenced`; grants from quarantined nodes, which did not count, are
    /// taken back at once. `kind`: what the lease is a lease on.
    fn granted(
        self,
        resource: &[u8],
        round: Round,
        expires: std::time::Instant,
        fenced: bool,
        kind: Box<dyn Kind>,
    ) -> Result<Lease, Error> {
        let sh = self.sh;
        let fencing_token = if fenced {
            match self.fence(&round, expires) {
                Ok(t) => Some(t),
                Err(e) => {
                    self.release_everywhere();
                    return Err(e);
                }
            }
        } else {
            None
        };
        // Grants that did not count: from a node not trusted yet, or answered with an error
        // (a plain acquisition's SET may have been applied on a node whose marker was then
        // found gone).
        let undo =
            |i: usize| round.untrusted[i] || matches!(round.replies[i], Some(Reply::Error { .. }));
        if (0..round.replies.len()).any(undo) {
            self.release_on(&undo);
        }
        let acquisition = sh.cluster.report(Op::Acquire, round.outcomes, None);
        Ok(Lease::new(
            sh,
            Granted {
                resource: resource.to_vec(),
                key: self.key,
                token: self.token,
                kind,
                fencing_token,
                ttl: self.ttl,
                start: round.start,
                expires,
                acquisition,
            },
        ))
    }

    /// Releases the key on every node, including those that did not seem to grant it (a
    /// timed-out `SET` may still have been applied), without waiting: the release is queued
    /// behind the attempt's own command on each node's connection, and its replies are
    /// discarded later, so a failed attempt costs no extra round trip.
    fn release_everywhere(&self) {
        self.release_on(&|_| true);
    }

    fn release_on(&self, to: &dyn Fn(usize) -> bool) {
        let (sha, eval) = match self.owner {
            Some(owner) => reentrant::discard(self, owner),
            None => DISCARD_SCRIPT.calls(&[&self.key], &[self.token.as_bytes()]),
        };
        let slot = crate::slot::key_slot(&self.key);
        self.sh
            .cluster
            .detach(&sha, Some(&eval), (1, Some(slot)), to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_to_the_acquisition_scripts() {
        let wrongtype = Reply::Error {
            code: "WRONGTYPE".into(),
            text: "WRONGTYPE x".into(),
        };
        assert!(matches!(
            granted_checked(&wrongtype),
            NodeOutcome::ServerError(_)
        ));
        assert!(granted_checked(&Reply::Int(1)).is_success());
        assert_eq!(granted_checked(&Reply::Int(0)), NodeOutcome::Rejected);
        assert_eq!(granted_checked(&Reply::Int(-2)), NodeOutcome::Rejected);
        assert_eq!(granted_checked(&Reply::Int(-1002)), NodeOutcome::Rejected);
        assert_eq!(
            refusal_pttl(&Reply::Int(-1002)),
            Some(Duration::from_millis(1000))
        );
        assert_eq!(refusal_pttl(&Reply::Int(-2)), Some(Duration::ZERO));
        assert_eq!(refusal_pttl(&Reply::Int(-1)), None);
        assert_eq!(refusal_pttl(&Reply::Int(0)), None);
        assert_eq!(granted_fenced(&Reply::Int(-1002)), NodeOutcome::Rejected);
        assert!(matches!(
            granted_checked(&Reply::Ok),
            NodeOutcome::Protocol(_)
        ));
        let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        assert!(granted_fenced(&bulk("0")).is_success());
        assert!(granted_fenced(&bulk("9007199254740993")).is_success());
        assert_eq!(
            counter(&bulk("9007199254740993")),
            Some(9_007_199_254_740_993)
        );
        assert_eq!(counter(&bulk("18446744073709551615")), Some(u64::MAX));
        // Not a canonical counter: too large, signed, padded, not a number.
        for bad in ["18446744073709551616", "-1", "01", "x", ""] {
            assert_eq!(counter(&bulk(bad)), None, "{bad}");
            assert!(!granted_fenced(&bulk(bad)).is_success(), "{bad}");
        }
        assert_eq!(granted_fenced(&Reply::Int(-1)), NodeOutcome::Rejected);
        assert!(matches!(
            granted_fenced(&Reply::Ok),
            NodeOutcome::Protocol(_)
        ));
        assert!(confirmed(Op::Extend, &Reply::Int(1)).is_success());
        assert_eq!(
            confirmed(Op::Release, &Reply::Int(0)),
            NodeOutcome::Rejected
        );
        assert!(matches!(
            confirmed(Op::Release, &Reply::Ok),
            NodeOutcome::Protocol(_)
        ));
    }

    #[test]
    fn the_plain_acquisitions_replies_read_as_the_scripts() {
        let int = Reply::Int;
        let err = |code: &str| Reply::Error {
            code: code.into(),
            text: format!("{code} x"),
        };
        let nomarker = Reply::Error {
            code: "NOMARKER".into(),
            text: "NOMARKER no restart-quarantine marker on this node".into(),
        };
        // Without the marker check (2 parts) and with it, present (3 parts, EXISTS 1).
        for marker in [None, Some(int(1))] {
            let r = |set: Reply, pttl: Reply| {
                let mut parts = vec![set, pttl];
                parts.extend(marker.clone());
                acquire_reply(&parts)
            };
            assert_eq!(r(Reply::Ok, int(5000)), int(1));
            assert!(granted_checked(&r(Reply::Ok, int(5000))).is_success());
            // Held: -2 - PTTL, which the judge reads as a refusal with the holder's TTL.
            assert_eq!(r(Reply::Nil, int(1000)), int(-1002));
            assert_eq!(r(Reply::Nil, int(0)), int(-2));
            let held = r(Reply::Nil, int(1000));
            assert_eq!(granted_checked(&held), NodeOutcome::Rejected);
            assert_eq!(refusal_pttl(&held), Some(Duration::from_millis(1000)));
            // Held with no TTL (-1), or gone by the time PTTL ran (-2): held, no TTL known.
            for t in [-1, -2] {
                assert_eq!(r(Reply::Nil, int(t)), int(0));
                assert_eq!(refusal_pttl(&r(Reply::Nil, int(t))), None);
            }
            // An error in any part is that error.
            assert_eq!(r(err("OOM"), int(-2)), err("OOM"));
            assert_eq!(r(Reply::Ok, err("NOPERM")), err("NOPERM"));
            assert!(matches!(
                granted_checked(&r(Reply::Nil, err("NOPERM"))),
                NodeOutcome::ServerError(_)
            ));
            // Anything else is a protocol error, never a grant or a refusal.
            for (set, pttl) in [
                (int(1), int(5000)),
                (int(0), int(5000)),
                (Reply::Bulk(b"OK".to_vec()), int(5000)),
                (Reply::Nil, Reply::Nil),
                (Reply::Nil, Reply::Bulk(b"5".to_vec())),
                (Reply::Status("QUEUED".into()), int(1)),
            ] {
                let o = granted_checked(&r(set.clone(), pttl.clone()));
                assert!(
                    matches!(o, NodeOutcome::Protocol(_)),
                    "{set:?} {pttl:?}: {o:?}"
                );
            }
        }
        // The marker gone: NOMARKER (the script's very reply), whatever SET and PTTL said.
        for (set, pttl) in [
            (Reply::Ok, int(5000)),
            (Reply::Nil, int(1000)),
            (err("OOM"), int(-2)),
        ] {
            assert_eq!(acquire_reply(&[set, pttl, int(0)]), nomarker);
        }
        // The marker check's own error, or an answer that is not 0 or 1.
        assert_eq!(
            acquire_reply(&[Reply::Ok, int(5000), err("NOPERM")]),
            err("NOPERM")
        );
        for bad in [int(2), Reply::Nil, Reply::Ok] {
            let o = granted_checked(&acquire_reply(&[Reply::Ok, int(5000), bad.clone()]));
            assert!(matches!(o, NodeOutcome::Protocol(_)), "{bad:?}: {o:?}");
        }
        // Not two or three parts.
        for parts in [
            vec![],
            vec![Reply::Ok],
            vec![Reply::Ok, int(1), int(1), int(1)],
        ] {
            let o = granted_checked(&acquire_reply(&parts));
            assert!(matches!(o, NodeOutcome::Protocol(_)), "{parts:?}: {o:?}");
        }
    }

    #[test]
    fn keys_and_counters_live_in_separate_namespaces() {
        let cfg = crate::Config::default();
        assert_eq!(cfg.lock_key(b"r\0").unwrap(), b"redlock:r\0".to_vec());
        assert_eq!(fence_key_for(b"r"), b"redlock-fence:r".to_vec());
        assert_ne!(cfg.lock_key(b"-fence:r").unwrap(), fence_key_for(b"r"));
        let bare = crate::Config::default().key_prefix("");
        assert_eq!(bare.lock_key(b"r").unwrap(), b"r".to_vec());
        assert!(bare.lock_key(b"redlock-fence:r").is_err());
        assert!(bare.lock_key(b"redlock-marker").is_err());
        assert!(bare.lock_key(b"redlock-markers").is_ok());
        let odd = crate::Config::default().key_prefix("redlock-");
        assert!(odd.lock_key(b"fence:x").is_err());
        assert!(odd.lock_key(b"marker").is_err());
    }
}
