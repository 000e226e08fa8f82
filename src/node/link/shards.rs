//! A cluster node's shards (ARCHITECTURE.md, "Cluster nodes"): its slot map, one link per
//! shard primary, and the route from a request's slot to the link that serves it.
//!
//! The map starts empty: a request for a slot with no known owner goes to a seed node, whose
//! handshake reads the whole map (`CLUSTER SHARDS`) and whose reply, if it does not own the
//! slot, is a redirect the round follows. Every shard link's handshake reloads the map, and a
//! `MOVED` corrects one slot at once. A shard whose link is failing (its primary died; a
//! replica may be taking over) is not asked: another primary is, whose `MOVED` names the
//! slot's owner as the cluster sees it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::Link;
use crate::node::entry::Redirected;
use crate::node::health::{Endpoint, Node, Redirect, SlotMap};

/// Builds the node of one shard primary (its index, credentials, TLS client and handshake are
/// the cluster node's): the manager's, so that the link need not know the configuration. It
/// resolves a host name by the `Instant` at most (a look-up that takes longer is an `Err`).
pub(crate) type MakeShard =
    Box<dyn Fn(&Endpoint, &Arc<Mutex<SlotMap>>, Instant) -> Result<Node, String> + Send + Sync>;

/// A cluster node's shards.
pub(crate) struct Shards {
    /// Shared with each shard's node, whose handshake reloads it.
    pub(crate) map: Arc<Mutex<SlotMap>>,
    /// One link per primary, by its index in the map; made on first use.
    links: Mutex<Vec<Option<Arc<Link>>>>,
    seeds: Vec<Endpoint>,
    make: MakeShard,
    /// Redirects followed (`MOVED`, `ASK`), for the metrics.
    pub(crate) moved: AtomicU64,
    pub(crate) asked: AtomicU64,
    /// Redirects its shards answered that nobody followed: written again by the manager's
    /// next step.
    pub(crate) redirected: Arc<Mutex<Vec<Redirected>>>,
}

impl Shards {
    pub(crate) fn new(seeds: Vec<Endpoint>, make: MakeShard) -> Shards {
        Shards {
            map: Arc::new(Mutex::new(SlotMap::new())),
            links: Mutex::new(Vec::new()),
            seeds,
            make,
            moved: AtomicU64::new(0),
            asked: AtomicU64::new(0),
            redirected: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn map(&self) -> MutexGuard<'_, SlotMap> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn made(&self, i: usize) -> Option<Arc<Link>> {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        links.get(i).cloned().flatten()
    }

    /// The link to primary `to`, made on first use, when its host name resolves by `by`.
    /// `Err`: its address cannot be used, or not yet. The name is resolved outside the lock,
    /// so that other rounds are not held up by the look-up.
    pub(crate) fn link_to(
        &self,
        to: &Endpoint,
        now: Instant,
        by: Instant,
    ) -> Result<Arc<Link>, String> {
        let i = self.map().primary(to);
        if let Some(l) = self.made(i) {
            return Ok(l);
        }
        let mut link = Link::new((self.make)(to, &self.map, by)?, now);
        link.redirected = Some(Arc::clone(&self.redirected));
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        if links.len() <= i {
            links.resize(i + 1, None);
        }
        // Another round may have made it meanwhile: there is one link per primary.
        Ok(Arc::clone(links[i].get_or_insert_with(|| Arc::new(link))))
    }

    /// The link that serves `slot`: its owner's, or, when the owner is unknown or failing,
    /// a seed's or another primary's (which redirects to the owner). A link made now resolves
    /// its host name by `by` at most.
    pub(crate) fn route(&self, slot: u16, now: Instant, by: Instant) -> Result<Arc<Link>, String> {
        let owner = {
            let m = self.map();
            m.owner(slot).map(|i| m.primaries()[i].clone())
        };
        if let Some(o) = &owner {
            let l = self.link_to(o, now, by)?;
            if !l.node.failing() {
                return Ok(l);
            }
        }
        // Any other link that is not failing, then the seeds in order.
        let others: Vec<Arc<Link>> = self
            .links()
            .into_iter()
            .filter(|l| {
                !l.node.failing() && l.node.shard.as_ref().map(|s| &s.endpoint) != owner.as_ref()
            })
            .collect();
        if let Some(l) = others.into_iter().next() {
            return Ok(l);
        }
        let mut first = None;
        for seed in &self.seeds {
            let l = self.link_to(seed, now, by)?;
            if !l.node.failing() {
                return Ok(l);
            }
            first.get_or_insert(l);
        }
        Ok(first.expect("a cluster URL names at least one seed"))
    }

    /// Follows a redirect: for `MOVED`, the map learns the slot's new owner. Returns the link
    /// to send the command to (made now, it resolves its host name by `by` at most).
    pub(crate) fn follow(
        &self,
        r: &Redirect,
        now: Instant,
        by: Instant,
    ) -> Result<Arc<Link>, String> {
        if r.ask {
            self.asked.fetch_add(1, Ordering::Relaxed);
        } else {
            self.moved.fetch_add(1, Ordering::Relaxed);
            self.map().moved(r.slot, &r.to);
        }
        self.link_to(&r.to, now, by)
    }

    /// Each primary that owns a slot ("host:port"), with a slot that routes to it; empty while
    /// the map is not known.
    pub(crate) fn owners(&self) -> Vec<(String, u16)> {
        let m = self.map();
        m.owners()
            .into_iter()
            .map(|(e, s)| (e.to_string(), s))
            .collect()
    }

    /// The links of the primaries that own a slot (made on first use, resolving host names by
    /// `by` at most), and whether every such primary has one; empty while the map is not
    /// known.
    pub(crate) fn owning_links(&self, now: Instant, by: Instant) -> (Vec<Arc<Link>>, bool) {
        let owners: Vec<Endpoint> = {
            let m = self.map();
            m.owners().into_iter().map(|(e, _)| e.clone()).collect()
        };
        let links: Vec<Arc<Link>> = (owners.iter())
            .filter_map(|e| self.link_to(e, now, by).ok())
            .collect();
        let all = links.len() == owners.len();
        (links, all)
    }

    /// Every shard link made so far.
    pub(crate) fn links(&self) -> Vec<Arc<Link>> {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        links.iter().flatten().cloned().collect()
    }
}
