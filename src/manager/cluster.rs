//! Building a cluster node (`redis+cluster://`): its seeds, and how each of its shard
//! primaries' nodes is made when the slot map or a redirect first names it.

use std::sync::{Arc, Mutex};

use crate::config::{Lookups, NodeAddr, Resolver};
use crate::error::Error;
use crate::node::health::{Endpoint, ShardOf, SlotMap};
use crate::node::{MakeShard, Node, Peers, QuarantinePolicy, Shards};
use crate::scripts;
use crate::tls;

/// Node `i`, a cluster: the node that stands for it in reports (reached at its first seed,
/// which also carries its release notifications: a cluster delivers `PUBLISH` on every node)
/// and its shards.
pub(super) fn cluster_node(
    i: usize,
    addr: NodeAddr,
    peers: &Arc<Peers>,
    tls: Option<&Arc<tls::Connector>>,
    policy: QuarantinePolicy,
    resolver: &Resolver,
) -> Result<(Node, Shards), Error> {
    let bad = |m: String| Error::InvalidInput(format!("node {i} ({addr}): {m}"));
    let seeds: Vec<Endpoint> = (addr.seeds().iter())
        .map(|(host, port)| Endpoint {
            host: host.clone(),
            port: *port,
        })
        .collect();
    let first = addr.resolve(resolver).map_err(bad)?.first().copied();
    let client = match tls.filter(|_| addr.is_tls()) {
        Some(t) => Some(t.client(addr.host()).map_err(bad)?),
        None => None,
    };
    let base = addr.clone();
    let tls = tls.cloned();
    let shard_peers = Arc::clone(peers);
    // A shard's host name (a cluster that announces names, not addresses) is looked up by
    // the round's deadline at most, never for as long as the resolver takes.
    let lookups = Lookups::with(resolver.clone());
    let again = resolver.clone();
    let make: MakeShard = Box::new(move |e: &Endpoint, map: &Arc<Mutex<SlotMap>>, by| {
        let shard = base.shard(&e.host, e.port);
        let sockaddr = lookups
            .resolve_by(&e.host, e.port, by)
            .map_err(|m| format!("{shard}: {m}"))?;
        let client = match tls.as_ref().filter(|_| shard.is_tls()) {
            Some(t) => Some(t.client(&e.host)?),
            None => None,
        };
        // The manager's peers: another node that reaches this shard's server is the same
        // cluster (or server), and does not vote.
        let peers = Arc::clone(&shard_peers);
        let mut node = Node::new(
            i,
            shard,
            Some(sockaddr),
            client,
            &scripts::ALL,
            policy,
            peers,
        );
        let of = ShardOf {
            map: Arc::clone(map),
            endpoint: e.clone(),
            no_shards: Default::default(),
        };
        node.set_shard(of, &scripts::ALL);
        node.look_up_again(&again);
        Ok(node)
    });
    let node = Node::new(
        i,
        addr,
        first,
        client,
        &scripts::ALL,
        policy,
        Arc::clone(peers),
    );
    Ok((node, Shards::new(seeds, make)))
}
