//! The reentrant lock: the mutex with an owner id. The same owner acquires it again at once;
//! it is held until every lease of that owner has been released or has expired.
//!
//! The key is a hash of the owner and one hold per lease (see
//! [`REENTRANT_ACQUIRE`](crate::scripts::REENTRANT_ACQUIRE) for the layout and why holds
//! rather than a count). A lease's hold id is its token. Grants, refusals, the decide rule and
//! the undo of a failed attempt are the plain lock's (mod.rs); only the commands and the
//! replies differ, and the fencing rule:
//!
//! A fenced re-entry keeps the token of the owner's current tenure. Each granting node offers
//! the tenure token it stores (the hash's `fence` field) when its counter has not moved past
//! it, else one more than its counter; the token is the largest offer, written back as a
//! plain fenced grant writes its token. It is strictly greater than every token confirmed for
//! an earlier tenure of another owner: that token reached a quorum's counters, which meets
//! this round's quorum in a node whose offer is above it (another owner can write a counter
//! only while it holds the key, that is, before this owner's hold appeared there, and an offer
//! is never below the counter the node had when the tenure's token was set on it). Within a
//! tenure every lease then reports the same token, so a store that took the outer lease's
//! writes also takes the inner one's, and the outer one's again after the inner one returns.
//! When a node's counter has moved past its stored tenure token (only a lost or restored
//! dataset does that), the re-entry takes a new, larger token, and writes made with the older
//! one are turned away from then on: safe, and reported by the lease's
//! [`fencing_token`](crate::Lease::fencing_token).

use crate::config::MARKER_KEY;
use crate::error::{Error, NodeOutcome};
use crate::quorum::{Cmd, Limits, Request, Round};
use crate::resp::{self, Reply};
use crate::scripts::{
    REENTRANT_ACQUIRE_SCRIPT, REENTRANT_FENCE_WRITE_SCRIPT, REENTRANT_RELEASE_SCRIPT,
};

use super::{Attempt, counter, granted_checked, granted_fenced};

/// What a node's reply to the fenced reentrant acquisition means: granted with
/// `{counter, tenure token or ""}`, else as the plain scripts.
fn granted_fenced_reentrant(reply: &Reply) -> NodeOutcome {
    match reply {
        Reply::Array(items) if items.len() == 2 => match (&items[0], &items[1]) {
            (c @ Reply::Bulk(_), Reply::Bulk(f))
                if counter(c).is_some() && (f.is_empty() || counter(&items[1]).is_some()) =>
            {
                NodeOutcome::Success
            }
            _ => NodeOutcome::Protocol(format!("unexpected reply: {}", reply.describe())),
        },
        other => granted_fenced(other),
    }
}

/// The first round of a reentrant attempt: the reentrant acquisition script on every node
/// (the shared one for a shared attempt, whose owner is empty).
pub(super) fn first_round(a: &Attempt<'_>, owner: &[u8], fenced: bool) -> Result<Round, Error> {
    let mut digits = [0u8; 20];
    let ttl_ms = resp::decimal(a.ttl.as_millis() as u64, &mut digits);
    let flag: &[u8] = if fenced { b"1" } else { b"0" };
    let args: [&[u8]; 4] = [a.token.as_bytes(), ttl_ms, owner, flag];
    let (cmd, fallback) = if a.shared {
        super::shared::acquire_call(a, &args)
    } else if a.sh.cfg.restart_quarantine {
        REENTRANT_ACQUIRE_SCRIPT.calls(&[&a.key, &a.fence_key, MARKER_KEY], &args)
    } else {
        REENTRANT_ACQUIRE_SCRIPT.calls(&[&a.key, &a.fence_key], &args)
    };
    let req = Request {
        cmd: Cmd::Same(&cmd),
        fallback: Some(&fallback),
        combine: None,
        grants: true,
        work: 1,
    };
    let judge = |_: usize, r: &Reply| {
        if fenced {
            granted_fenced_reentrant(r)
        } else {
            granted_checked(r)
        }
    };
    let limits = Limits::quorum(a.sh.budget.acquire_bound(a.ttl));
    a.sh.cluster.round(&req, &judge, limits)
}

/// One granting node's counter, and its offer for the fencing token (see the module's
/// comment): the tenure token it stores unless its counter has moved past it, else one more
/// than the counter (`None` when the counter is at the top of the range).
pub(super) fn fence_candidate(reply: &Reply) -> (Option<u64>, Option<u64>) {
    let Reply::Array(items) = reply else {
        return (None, None);
    };
    let (Some(c), f) = (
        items.first().and_then(counter),
        items.get(1).and_then(counter),
    ) else {
        return (None, None);
    };
    match f {
        Some(f) if f >= c && f > 0 => (Some(c), Some(f)),
        _ => (Some(c), c.checked_add(1)),
    }
}

/// The second round's command of a fenced reentrant attempt: writes token `t` back.
pub(super) fn fence_write(a: &Attempt<'_>, owner: &[u8], t: &str) -> (Vec<u8>, Vec<u8>) {
    REENTRANT_FENCE_WRITE_SCRIPT.calls(
        &[&a.key, &a.fence_key],
        &[a.token.as_bytes(), t.as_bytes(), owner],
    )
}

/// The undo of a failed attempt: removes this attempt's hold only, without announcing.
pub(super) fn discard(a: &Attempt<'_>, owner: &[u8]) -> (Vec<u8>, Vec<u8>) {
    REENTRANT_RELEASE_SCRIPT.calls(&[&a.key], &[a.token.as_bytes(), b"0", owner])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn replies_to_the_fenced_reentrant_acquisition() {
        let granted = Reply::Array(vec![bulk("7"), bulk("")]);
        assert!(granted_fenced_reentrant(&granted).is_success());
        let tenure = Reply::Array(vec![bulk("7"), bulk("7")]);
        assert!(granted_fenced_reentrant(&tenure).is_success());
        assert_eq!(
            granted_fenced_reentrant(&Reply::Int(-1002)),
            NodeOutcome::Rejected
        );
        for bad in [
            Reply::Array(vec![bulk("x"), bulk("")]),
            Reply::Array(vec![bulk("1"), bulk("01")]),
            Reply::Array(vec![bulk("1")]),
            Reply::Int(1),
        ] {
            assert!(!granted_fenced_reentrant(&bad).is_success(), "{bad:?}");
        }
    }

    #[test]
    fn a_node_offers_the_tenure_token_unless_its_counter_moved_past_it() {
        let r = |c: &str, f: &str| Reply::Array(vec![bulk(c), bulk(f)]);
        // First grant on this node: one more than the counter.
        assert_eq!(fence_candidate(&r("4", "")), (Some(4), Some(5)));
        // The tenure's token, which is the counter the tenure set.
        assert_eq!(fence_candidate(&r("5", "5")), (Some(5), Some(5)));
        // A counter past the stored token (a stale hash): never repeat it, go above.
        assert_eq!(fence_candidate(&r("9", "5")), (Some(9), Some(10)));
        assert_eq!(
            fence_candidate(&r("18446744073709551615", "")),
            (Some(u64::MAX), None)
        );
        assert_eq!(
            fence_candidate(&r("18446744073709551615", "18446744073709551615")),
            (Some(u64::MAX), Some(u64::MAX))
        );
        assert_eq!(fence_candidate(&Reply::Int(1)), (None, None));
    }
}
