//! Admitting nodes the operator knows are new (`Redlock::admit_new_nodes`): restart
//! quarantine cannot tell a new server from one that restarted empty (neither has a marker),
//! so a node added to a cluster that met this library before waits out the maximum TTL. An
//! operator who knows a node never held a lock may say so: the node is trusted at once and its
//! marker written, and confirmed, before the call returns.
//!
//! Only the reasons a new server can have are admitted: no marker (`NoMarker`), or up for
//! less than the maximum TTL in a cluster with no marker yet (`Young`, `Undecided`). A restart
//! this manager saw, a promotion or a marker of another server are facts about the node's
//! past, not doubts: those wait out their quarantine.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Cluster, Cmd, Limits, Request, Until};
use crate::error::{Error, NodeOutcome, Op, QuarantineReason, Report};
use crate::node::health::Hs;
use crate::node::{Link, Standing};
use crate::resp::Reply;

impl Cluster {
    /// Trusts nodes `nodes` (indexes) at once and writes their markers, confirmed; see the
    /// module's text. `node_timeout`: how long each node may take to answer.
    pub(crate) fn admit(&self, nodes: &[usize], node_timeout: Duration) -> Result<(), Error> {
        if !self.policy_enabled {
            return Err(Error::invalid(
                "restart quarantine is off: every node counts already; nothing to admit",
            ));
        }
        for &i in nodes {
            let Some(link) = self.links.get(i) else {
                return Err(Error::invalid(format!(
                    "node {i}: there are {} nodes (0 to {})",
                    self.links.len(),
                    self.links.len().saturating_sub(1)
                )));
            };
            if link.shards.is_some() {
                return Err(Error::invalid(format!(
                    "node {i} ({}) is a cluster node: its shards are admitted one by one by \
                     the quarantine rules, not by this call",
                    link.node.addr
                )));
            }
        }
        // Every node answers a PING first: its handshake reads its identity and marker, and
        // the rule decides what it can.
        self.ping(&|_| true, node_timeout)?;
        self.decide_trust(self.now());
        let mut admitted: Vec<&Arc<Link>> = Vec::new();
        for &i in nodes {
            let link = &self.links[i];
            let node = &link.node;
            if !may_be_new(i, link)? {
                continue;
            }
            let Some(value) = node.make_trusted() else {
                return Err(unreached(i, link, "its identity is unknown"));
            };
            log::warn!(
                "node {i} ({}) admitted as new by the operator; writing its marker",
                node.addr
            );
            for cmd in node.marker_write_cmds(&value) {
                link.send_health(&cmd, Hs::MarkerWrite, self.now(), &self.settings);
            }
            admitted.push(link);
        }
        if admitted.is_empty() {
            return Ok(());
        }
        self.trust_epoch.fetch_add(1, Ordering::Release);
        // A PING behind the marker writes: its reply comes after theirs.
        let on = |i: usize| admitted.iter().any(|l| Arc::ptr_eq(l, &self.links[i]));
        self.ping(&on, node_timeout)?;
        match admitted.iter().find(|l| !l.node.marker_present()) {
            Some(l) => Err(unreached(
                l.node.index,
                l,
                "its marker write was not confirmed",
            )),
            None => Ok(()),
        }
    }

    /// A `PING` to the nodes `to` selects, waiting for each; an error names the first that
    /// did not answer.
    fn ping(&self, to: &dyn Fn(usize) -> bool, node_timeout: Duration) -> Result<(), Error> {
        let mut ping = Vec::new();
        crate::resp::pack(&[b"PING"], &mut ping);
        let cmds: Vec<Option<Vec<u8>>> = (0..self.links.len())
            .map(|i| to(i).then(|| ping.clone()))
            .collect();
        let req = Request {
            cmd: Cmd::PerNode(&cmds),
            fallback: None,
            combine: None,
            slot: None,
            slots: None,
            split: None,
            grants: false,
            work: 1,
        };
        let limits = Limits {
            node_timeout,
            cap: None,
            until: Until::All,
        };
        let judge = |_: usize, r: &Reply| match r {
            Reply::Status(s) if s == "PONG" => NodeOutcome::Success,
            other => NodeOutcome::Protocol(other.describe()),
        };
        let round = self.round(&req, &judge, limits)?;
        for (i, o) in round.outcomes.iter().enumerate() {
            if to(i) && !o.is_success() {
                return Err(unreached(i, &self.links[i], &o.to_string()));
            }
        }
        Ok(())
    }
}

/// Node `i` could not be admitted: `why`.
fn unreached(i: usize, link: &Link, why: &str) -> Error {
    Error::Unavailable(Report {
        op: Op::Acquire,
        successes: 0,
        quorum: 0,
        nodes: Vec::new(),
        detail: Some(format!(
            "node {i} ({}) cannot be admitted: {why}",
            link.node.addr
        )),
        expires_in: None,
    })
}

/// Whether node `i` may be admitted: `Ok(false)` when it is trusted already, an error naming
/// why when it is not new (a restart seen, a promotion, a stale marker, another process's loss
/// note) or could not be read.
fn may_be_new(i: usize, link: &Link) -> Result<bool, Error> {
    let node = &link.node;
    let not_new = |why: &str| {
        Error::invalid(format!(
            "node {i} ({}) is not new: {why}; it is trusted again once its quarantine is over",
            node.addr
        ))
    };
    if node.loss_noted() {
        return Err(not_new(
            "another process noted that it restarted or lost its data (the key \
             redlock-marker-lost)",
        ));
    }
    match node.standing() {
        Standing::Trusted => Ok(false),
        Standing::Unknown => Err(unreached(i, link, "its marker could not be read")),
        Standing::Quarantined {
            reason:
                QuarantineReason::NoMarker | QuarantineReason::Young | QuarantineReason::Undecided,
            ..
        }
        | Standing::Undecided { .. } => Ok(true),
        Standing::Quarantined { reason, .. } => Err(not_new(reason.describe())),
    }
}
