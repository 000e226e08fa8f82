//! Several resources at once, all or none: one attempt sets every resource's lock key on each
//! node in one script ([`MULTI_ACQUIRE`](crate::scripts::MULTI_ACQUIRE)), which grants all of
//! them or none there. The lock is held when a quorum of nodes granted all of them and
//! validity is left: the plain lock's decide rule (mod.rs), over the same keys a plain lock of
//! each resource uses, so a multi-resource holder and a plain (or shared) holder of any one of
//! the resources exclude each other. A failed attempt takes its grants back everywhere.
//!
//! No node ever holds a part of the set for a caller, so two callers that name overlapping
//! sets, in any order, never wait for each other's part: no deadlock, whatever the order.
//!
//! The lease covers the set: release and extension run the multi-key scripts
//! ([`MULTI_RELEASE`](crate::scripts::MULTI_RELEASE),
//! [`MULTI_EXTEND`](crate::scripts::MULTI_EXTEND)), and renewal carries each key in the batch
//! (renew.rs), counting the lease renewed on a node only where every key was.

use std::sync::Arc;
use std::time::Duration;

use crate::config::MARKER_KEY;
use crate::error::{Error, Op};
use crate::lease::{Granted, Lease, Many, Shared};
use crate::quorum::{Cmd, Limits, Request};
use crate::resp::{self, Reply};
use crate::scripts::{MULTI_ACQUIRE_SCRIPT, MULTI_RELEASE_SCRIPT};
use crate::token;

use super::{decide, granted_checked};

/// One attempt to acquire every resource of `resources` (whose lock keys are `keys`, in the
/// same order, no two alike) for `ttl`: one lease for all of them, or why not. The arguments
/// are already validated.
pub(crate) fn attempt(
    sh: &Arc<Shared>,
    resources: &[Vec<u8>],
    keys: &[Vec<u8>],
    ttl: Duration,
) -> Result<Lease, Error> {
    let token = token::new_value(crate::timing::wall_ms(), sh.cfg.label.as_deref())?;
    let mut digits = [0u8; 20];
    let ttl_ms = resp::decimal(ttl.as_millis() as u64, &mut digits).to_vec();
    let n = keys.len().to_string();
    let mut all: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    if sh.cfg.restart_quarantine {
        all.push(MARKER_KEY);
    }
    let (cmd, fallback) =
        MULTI_ACQUIRE_SCRIPT.calls(&all, &[token.as_bytes(), &ttl_ms, n.as_bytes()]);
    let req = Request {
        cmd: Cmd::Same(&cmd),
        fallback: Some(&fallback),
        combine: None,
        grants: true,
        work: keys.len(),
    };
    let limits = Limits::quorum(sh.budget.acquire_bound(ttl));
    let round = sh
        .cluster
        .round(&req, &|_, r: &Reply| granted_checked(r), limits)?;
    let undo = |to: &dyn Fn(usize) -> bool| {
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let (sha, eval) = MULTI_RELEASE_SCRIPT.calls(&keys, &[token.as_bytes(), b"0"]);
        sh.cluster.detach(&sha, Some(&eval), keys.len(), to);
    };
    let (round, expires) = decide(sh, round, ttl, &undo)?;
    // Grants from quarantined nodes did not count: take them back at once.
    if round.untrusted.iter().any(|u| *u) {
        undo(&|i| round.untrusted[i]);
    }
    let acquisition = sh.cluster.report(Op::Acquire, round.outcomes, None);
    Ok(Lease::new(
        sh,
        Granted {
            resource: resources[0].clone(),
            key: keys[0].clone(),
            token,
            owner: None,
            fencing_token: None,
            ttl,
            start: round.start,
            expires,
            acquisition,
            many: Some(Many {
                resources: resources.to_vec(),
                keys: keys.to_vec(),
            }),
            permit: None,
            fair: None,
        },
    ))
}
