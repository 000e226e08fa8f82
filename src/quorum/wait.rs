//! A round's participants in `poll(2)`: one per node, and the call's waker.

use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

use super::Cluster;
use crate::error::NodeOutcome;
use crate::mux::{Interest, Readiness, Source};
use crate::node::call::Wakes;
use crate::node::{Call, Link, Slot};

/// One participant in a round's `poll(2)`: a node, or the call's waker.
pub(super) struct Wait<'a> {
    cluster: Option<&'a Cluster>,
    /// The wake-ups this round's reads owe other calls, sent once per `poll(2)` round.
    wakes: &'a RefCell<Wakes>,
    call: &'a Call,
    /// The node's link (for a cluster node, the link of the shard that serves the request).
    pub(super) link: Option<Arc<Link>>,
    /// This call polls the link (see node/link.rs).
    pub(super) driving: bool,
    /// The connection was being set up when the command was written.
    pub(super) starting: bool,
    /// While this call's reply from the node is outstanding.
    pub(super) deadline: Option<Instant>,
    /// Redirects followed for this node (a cluster node's shard answered `MOVED`, …).
    pub(super) redirects: u8,
    /// The slot the request was routed by (a cluster node's).
    pub(super) slot: Option<u16>,
    /// The call's slot this wait's reply fills (its target: see quorum/shards.rs).
    index: usize,
}

impl<'a> Wait<'a> {
    pub(super) fn node(
        cluster: &'a Cluster,
        (call, index): (&'a Call, usize),
        link: Arc<Link>,
        wakes: &'a RefCell<Wakes>,
    ) -> Wait<'a> {
        Wait {
            cluster: Some(cluster),
            wakes,
            call,
            link: Some(link),
            driving: false,
            starting: false,
            deadline: None,
            redirects: 0,
            slot: None,
            index,
        }
    }

    pub(super) fn wake(call: &'a Call, wakes: &'a RefCell<Wakes>) -> Wait<'a> {
        Wait {
            cluster: None,
            wakes,
            call,
            link: None,
            driving: false,
            starting: false,
            deadline: None,
            redirects: 0,
            slot: None,
            index: usize::MAX,
        }
    }
}

impl Source for Wait<'_> {
    fn interest(&self) -> Option<(RawFd, Interest)> {
        match &self.link {
            Some(link) if self.driving => link.interest(self.call),
            Some(_) => None,
            None => Some((
                self.call.waker().fd(),
                Interest {
                    read: true,
                    write: false,
                },
            )),
        }
    }

    fn second(&self) -> Option<(RawFd, Interest)> {
        match &self.link {
            Some(link) if self.driving && self.starting => link.probe_wants(self.call).1,
            _ => None,
        }
    }

    /// The node's deadline, or sooner the time its connection's probe is due (see
    /// `node::conn`): a connection being set up is probed only while this call drives it.
    fn deadline(&self) -> Option<Instant> {
        let d = self.deadline?;
        match &self.link {
            Some(link) if self.driving && self.starting => {
                Some(link.probe_wants(self.call).0.map_or(d, |p| p.min(d)))
            }
            _ => Some(d),
        }
    }

    fn on_ready(&mut self, ready: Readiness, now: Instant) {
        match (&self.link, self.cluster) {
            (Some(link), Some(c)) => {
                link.on_ready(ready, now, c.settings(), &mut self.wakes.borrow_mut());
                if !link.is_driven_by(self.call) {
                    self.driving = false;
                }
            }
            _ => self.call.waker().drain(),
        }
    }

    fn on_deadline(&mut self, now: Instant) {
        let (Some(link), Some(c)) = (&self.link, self.cluster) else {
            self.deadline = None;
            return;
        };
        if self.deadline.is_some_and(|d| now < d) {
            // The probe's time, not the node's deadline.
            link.probe(now, c.settings(), &mut self.wakes.borrow_mut());
            if !link.is_driven_by(self.call) {
                self.driving = false;
            }
            return;
        }
        self.deadline = None;
        // Read what has arrived first: a reply that is here is not a timeout, whoever was
        // supposed to read it.
        link.read_now(self.call, now, c.settings());
        let what = if self.starting {
            NodeOutcome::Unreachable("connect or handshake timeout".into())
        } else {
            NodeOutcome::Timeout
        };
        if self
            .call
            .fill(self.index, Slot::Failed(NodeOutcome::Timeout))
        {
            // Keep the connection: a slow node's reply is discarded when it comes, and a node
            // that stays silent is closed by the stale limit at a later round. The next step
            // waits twice as long for it (until a reply measures it again).
            link.node.rtt.timed_out();
            link.node.record_failure(now, &what, c.settings(), false);
        }
    }
}
