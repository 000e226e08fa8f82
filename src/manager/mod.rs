//! The manager: the public entry point that validates input, builds the nodes, and hands each
//! call to the primitive and the acquisition driver.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::acquire::{self, LockOptions, Wait};
use crate::config::{self, Config, Lookups, NodeAddr};
use crate::error::{Error, QuarantineReason};
use crate::holders::{self, Holders};
use crate::lease::{Lease, Shared};
use crate::lock;
use crate::metrics::{Metrics, RenewalStats};
use crate::node::sub::Sub;
use crate::node::{Ack, ConnSettings, Group, Node, Peers, QuarantinePolicy};
use crate::notify::Listener;
use crate::quorum::Cluster;
use crate::scan::{self, KeyKind, Scan};
use crate::scripts;
use crate::timing::{Clock, SystemClock};
use crate::tls;

mod admit;
mod cluster;
mod election;
mod semaphore;

use crate::ttl::Ttl;
pub use election::{Election, Leadership, Observer};
pub use semaphore::Semaphore;

/// What a manager knows of one node (see [`Redlock::node_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// The node's position in the configured node list, from 0.
    pub index: usize,
    /// The node's address, password redacted.
    pub addr: String,
    /// The server's `run_id` as of the last connection (`None` before the first, or if the
    /// node does not answer `INFO`).
    pub run_id: Option<String>,
    /// How long the server has been up (its last reported uptime, advanced by the client's
    /// clock since).
    pub uptime: Option<Duration>,
    /// Restarts seen: reconnections that found a new `run_id`.
    pub restarts_seen: u64,
    /// Promotions seen: handshakes that found the server's replication id changed to a new
    /// history (a replica made master; see [`QuarantineReason::Promoted`]).
    pub promotions_seen: u64,
    /// For a failover group (`redis+sentinel://`): the master its sentinels named last
    /// (`None` before the first answer, and for a plain node).
    pub master: Option<String>,
    /// `Some(remaining)` while the node is in restart quarantine (zero while undecided).
    pub quarantined_for: Option<Duration>,
    /// Why it is in restart quarantine, while it is.
    pub quarantine_reason: Option<QuarantineReason>,
    /// Its grants count now. False before its first handshake has been read.
    pub trusted: bool,
    /// Its smoothed round trip, as measured from replies (`None` before the first).
    pub rtt: Option<Duration>,
    /// Its retransmission timeout as TCP would compute it (`SRTT + max(1 ms, 4 × RTTVAR)`,
    /// doubled after each timeout): how steady the node is, for people. No step uses it as a
    /// deadline (see [`Config::node_timeout`](crate::Config::node_timeout)); `None` before the
    /// first measurement.
    pub rto: Option<Duration>,
}

/// A lock manager over N independent Redis masters.
///
/// Cheap to clone (the clones share connections), `Send + Sync`: many threads may lock at
/// once. The manager keeps one connection per node, shared by all of them: every command is
/// written to all nodes at once, and concurrent callers' commands to a node travel together.
///
/// Once every clone and every lease it made are dropped, a connection that still owes replies
/// (a slower node's, after steps that returned at quorum) is read to the end by a background
/// thread before it is closed, for at most the [stale limit](crate::Config::stale_limit): an
/// unlock that returned still reaches the slower nodes when the program drops the manager at
/// once. (A process that exits at once does not wait for it.)
#[derive(Clone)]
pub struct Redlock {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock")
            .field("nodes", &self.node_addrs())
            .field("quorum", &self.quorum())
            .finish()
    }
}

impl Redlock {
    /// Validates `config`, parses and resolves every node, and builds a manager. No connection
    /// is made until the first operation.
    ///
    /// Fails with [`Error::InvalidInput`] for no nodes, a malformed URL, a node listed twice
    /// (also when two names resolve to the same address and port), a drift factor outside
    /// `[0, 1)`, a zero timeout, or a TLS file that cannot be read or is not the PEM it should
    /// be (the message names its path; see [`TlsOptions`](crate::TlsOptions)).
    pub fn new(config: Config) -> Result<Redlock, Error> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    pub(crate) fn with_clock(config: Config, clock: Arc<dyn Clock>) -> Result<Redlock, Error> {
        let addrs = config.validate()?;
        let tls = Self::tls(&config, &addrs)?;
        let policy = QuarantinePolicy {
            enabled: config.restart_quarantine,
            max_ttl: config.max_ttl,
            durable: false,
        };
        let mut nodes = Vec::with_capacity(addrs.len());
        let peers = Peers::new(addrs.len());
        let mut seen: Vec<(usize, std::net::SocketAddr)> = Vec::new();
        for (i, addr) in addrs.into_iter().enumerate() {
            // A node marked durable keeps every write: restart quarantine is off for it alone.
            let policy = QuarantinePolicy {
                enabled: policy.enabled && !addr.is_durable(),
                durable: policy.enabled && addr.is_durable(),
                ..policy
            };
            if addr.is_sentinel() {
                let group = Self::group(i, &addr, &config, tls.as_ref())?;
                let peers = Arc::clone(&peers);
                let scripts = &scripts::ALL;
                let mut node = Node::new(i, addr, None, None, scripts, policy, peers);
                let ack = config.replica_acks.map(|(n, t)| Ack::new(n, t));
                node.set_group(group, ack);
                nodes.push((node, None));
                continue;
            }
            if addr.is_cluster() {
                let r = &config.resolver;
                let (node, shards) =
                    cluster::cluster_node(i, addr, &peers, tls.as_ref(), policy, r)?;
                nodes.push((node, Some(shards)));
                continue;
            }
            let resolved = addr
                .resolve(&config.resolver)
                .map_err(|m| Error::InvalidInput(format!("node {i}: {m}")))?;
            for sa in &resolved {
                if let Some((j, _)) = seen.iter().find(|(_, s)| s == sa) {
                    return Err(Error::InvalidInput(format!(
                        "node {i} ({addr}) resolves to {sa}, the same as node {j}; the nodes \
                         must be distinct servers"
                    )));
                }
            }
            seen.extend(resolved.iter().map(|sa| (i, *sa)));
            let first = resolved.first().copied();
            let peers = Arc::clone(&peers);
            let client = match (&tls, addr.is_tls()) {
                (Some(t), true) => Some(
                    t.client(addr.host())
                        .map_err(|m| Error::InvalidInput(format!("node {i} ({addr}): {m}")))?,
                ),
                _ => None,
            };
            let scripts = &scripts::ALL;
            let mut node = Node::new(i, addr, first, client, scripts, policy, peers);
            node.look_up_again(&config.resolver);
            nodes.push((node, None));
        }
        let settings = ConnSettings {
            connect_timeout: config.connect_timeout,
            stale_limit: config.stale_limit,
            backoff_min: config.reconnect_backoff_min,
            backoff_max: config.reconnect_backoff_max,
        };
        let cluster = Cluster::new(nodes, settings, clock, config.restart_quarantine);
        let listener = Listener::new(
            cluster.nodes().map(Sub::new).collect(),
            cluster.quorum(),
            cluster.settings().clone(),
            cluster.clock(),
        )
        .map_err(|e| Error::Internal(format!("cannot create the listener's wake-up: {e}")))?;
        Ok(Redlock {
            shared: Arc::new(Shared::new(cluster, config, listener)),
        })
    }

    /// TLS: the files are read (and the system's trust store, if no CA file is set) once, now,
    /// for every rediss:// node; files set for nodes without TLS are still checked.
    fn tls(config: &Config, addrs: &[NodeAddr]) -> Result<Option<Arc<tls::Connector>>, Error> {
        if addrs.iter().any(|a| a.is_tls()) {
            let c = config.tls.connector().map_err(Error::InvalidInput)?;
            Ok(Some(Arc::new(c)))
        } else {
            Config::check_tls(&config.tls)?;
            Ok(None)
        }
    }

    /// What node `i`, a failover group, asks its sentinels, and how it reaches them: their
    /// addresses (resolved now), the sentinels' credentials, TLS clients for `rediss+sentinel`.
    fn group(
        i: usize,
        addr: &NodeAddr,
        config: &Config,
        tls: Option<&Arc<tls::Connector>>,
    ) -> Result<Group, Error> {
        let bad = |m: String| Error::InvalidInput(format!("node {i} ({addr}): {m}"));
        let sentinels = addr
            .resolve_sentinels(&config.resolver)
            .map_err(|m| Error::InvalidInput(format!("node {i}: {m}")))?;
        let (sentinel_tls, master_tls) = match tls.filter(|_| addr.is_tls()) {
            Some(t) => (
                addr.sentinels()
                    .iter()
                    .map(|(h, _)| t.client(h).map(Some).map_err(&bad))
                    .collect::<Result<Vec<_>, _>>()?,
                Some(Arc::clone(t)),
            ),
            None => (vec![None; sentinels.len()], None),
        };
        let auth = config
            .sentinel_auth
            .as_ref()
            .map(|a| (a.username.as_deref(), a.password.as_str()));
        let service = addr.service().expect("a failover group names its service");
        let mut g = Group::new(service, sentinels, auth, sentinel_tls, master_tls);
        g.lookups = Lookups::with(config.resolver.clone());
        g.names = addr.sentinels().to_vec();
        Ok(g)
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.shared.cluster.len()
    }

    /// The number of nodes that must agree: `N / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.shared.cluster.quorum()
    }

    /// The node addresses, passwords redacted, in configuration order.
    pub fn node_addrs(&self) -> Vec<String> {
        self.shared
            .cluster
            .nodes()
            .map(|n| n.addr_text.clone())
            .collect()
    }

    /// The configuration this manager was built from.
    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// What the manager knows of each node, in configuration order: its identity and age as
    /// of the last connection, restarts seen, and whether it is in restart quarantine.
    pub fn node_states(&self) -> Vec<NodeState> {
        let now = self.shared.now();
        self.shared
            .cluster
            .nodes()
            .map(|n| {
                let id = n.identity();
                NodeState {
                    index: n.index,
                    addr: n.addr_text.clone(),
                    run_id: id.as_ref().map(|i| i.run_id.clone()),
                    uptime: id
                        .as_ref()
                        .map(|i| i.uptime + now.saturating_duration_since(i.seen_at)),
                    restarts_seen: n.restarts(),
                    promotions_seen: n.promotions(),
                    master: n.group.as_ref().and(n.master()).map(|a| a.to_string()),
                    quarantined_for: n.quarantine(now).map(|q| q.0),
                    quarantine_reason: n.quarantine(now).map(|q| q.1),
                    trusted: n.trusted(),
                    rtt: n.rtt.srtt(),
                    rto: n.rtt.rto(),
                }
            })
            .collect()
    }

    /// A snapshot of this manager's metrics: acquisitions by result, retries, wait and hold
    /// times, unlock and extend outcomes, renewal counters, and per-node requests, errors,
    /// latency, quarantine and connections opened. [`Metrics::to_prometheus`] renders them for scraping.
    pub fn metrics(&self) -> Metrics {
        let sh = &self.shared;
        let mut m = sh.cluster.metrics.snapshot();
        let now = sh.now();
        for (n, node) in m.nodes.iter_mut().zip(sh.cluster.nodes()) {
            n.addr = node.addr_text.clone();
            n.quarantined = node.quarantine(now).is_some();
            n.connections = sh.cluster.connections(n.index);
            (n.moved, n.asked) = sh.cluster.redirects(n.index);
            n.promotions = node.promotions();
            n.master = node
                .group
                .as_ref()
                .and(node.master())
                .map(|a| a.to_string());
        }
        m
    }

    /// The keys of `kind` on every node whose resource starts with `prefix` (all of them for
    /// an empty prefix), with their remaining TTL and value (a lock's holder token), found
    /// with `SCAN` through this manager's connections: the building block of
    /// `redlock inspect`, for tools that look for leaked or long-held locks. It waits for
    /// every node (up to 5 s per node and step); nodes that cannot be scanned are listed in
    /// [`Scan::failed`].
    pub fn scan(&self, kind: KeyKind, prefix: impl AsRef<[u8]>) -> Result<Scan, Error> {
        scan::scan(&self.shared, kind, prefix.as_ref())
    }

    /// Who holds `resource`: one read-only script on every node at once (waiting for every
    /// node, each for at most its node timeout), reporting per node the key's kind, the
    /// holder's identity and label, how long it has been held and its remaining TTL, and
    /// through [`Holders::holder`] the holder a quorum agrees on.
    ///
    /// A snapshot for people and monitoring, never a reason to act: the holder can change as
    /// soon as it is read (take the lock to act safely). Errors: [`Error::InvalidInput`] for
    /// a resource name that [`acquire`](Self::acquire) would refuse.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), redlock::Error> {
    /// let mgr = redlock::Redlock::new(
    ///     redlock::Config::new(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])
    ///         .label("billing-7:4242"),
    /// )?;
    /// match mgr.holders("invoices")?.holder() {
    ///     Some(h) => println!("held by {:?} for {:?}", h.label, h.held_for),
    ///     None => println!("not held on a quorum"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn holders(&self, resource: impl AsRef<[u8]>) -> Result<Holders, Error> {
        let resource = resource.as_ref();
        let key = self.shared.cfg.lock_key(resource)?;
        holders::holders(&self.shared, resource, &key)
    }

    /// Counters of the renewal thread (all zero until a lease is auto-renewed).
    pub fn renewal_stats(&self) -> RenewalStats {
        self.shared.cluster.metrics.renewal.snapshot()
    }

    /// Acquires `resource` for `ttl` with `opts`: waiting (one attempt, the retry policy, or
    /// until a deadline), a fencing token, auto-renewal. Every other acquisition method is
    /// this one with fixed options.
    ///
    /// One attempt sends `SET key token NX PX ttl` (in a script that also reports the holder's
    /// remaining TTL where it refuses) to every node at once and returns as soon as a quorum
    /// has granted it (or can no longer grant it). Between attempts it waits as `opts` say:
    /// with a deadline, until a release is announced (see [`LockOptions::notify`]). The lock is granted only with a
    /// quorum and a positive remaining validity (`TTL − elapsed − drift`). A failed attempt
    /// releases the key on every node, including those that did not seem to grant it.
    ///
    /// Errors: [`Error::InvalidInput`] (empty or oversized resource, TTL out of range, bad
    /// renewal options; nothing is sent), [`Error::NotAcquired`], [`Error::Unavailable`]
    /// (the last attempt's, when waiting ended without a grant), [`Error::Cancelled`] (through
    /// [`LockOptions::cancel`]), [`Error::Internal`].
    pub fn acquire(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<Lease, Error> {
        let resource = resource.as_ref();
        let sh = &self.shared;
        let (key, ttl) = match self.checked(resource, ttl, opts) {
            Ok(kt) => kt,
            Err(e) => return Err(self.refused_input(e)),
        };
        if opts.fair {
            return self.acquire_fair(resource, &key, ttl, opts);
        }
        // An exclusive acquisition that waits queues its intent against shared holders.
        let mut intent = match opts.wait {
            Wait::No => None,
            _ if opts.shared => None,
            _ => Some(lock::Intent::new(std::slice::from_ref(&key), ttl)),
        };
        let r = acquire::acquire(sh, opts, &key, || {
            let r = lock::attempt(
                sh,
                resource,
                &key,
                ttl,
                opts.fenced,
                opts.owner.as_deref(),
                opts.shared,
            );
            if let (Err(Error::NotAcquired(_)), Some(i)) = (&r, intent.as_mut()) {
                i.queue(sh);
            }
            r
        });
        if let Some(i) = &intent {
            i.finish(sh, r.is_err());
        }
        r
    }

    /// Checks an acquisition's input as [`acquire`](Self::acquire) does, and sends nothing:
    /// `Ok` when `acquire` would go on to contact the nodes, else the
    /// [`Error::InvalidInput`] it would return (counted nowhere). For a binding that must
    /// refuse bad input before it starts an acquisition (Python's `alock`), with the
    /// library's rule and message.
    pub fn check_acquire(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<(), Error> {
        self.checked(resource.as_ref(), ttl, opts).map(|_| ())
    }

    /// Checks the input of [`acquire_many`](Self::acquire_many) as it does, and sends
    /// nothing (see [`check_acquire`](Self::check_acquire)).
    pub fn check_acquire_many<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<(), Error> {
        let resources: Vec<Vec<u8>> = resources.iter().map(|r| r.as_ref().to_vec()).collect();
        self.check_many(&resources, ttl, opts).map(|_| ())
    }

    /// The lock key and TTL of an acquisition, or why its input is refused.
    fn checked(
        &self,
        resource: &[u8],
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<(Vec<u8>, Ttl), Error> {
        let sh = &self.shared;
        sh.cfg
            .lock_key(resource)
            .and_then(|key| Ttl::new(ttl, &sh.cfg).map(|ttl| (key, ttl)))
            .and_then(|kt| {
                opts.auto_renew
                    .as_ref()
                    .map_or(Ok(()), |r| r.validate())
                    .map(|_| kt)
            })
            .and_then(|kt| {
                opts.owner
                    .as_deref()
                    .map_or(Ok(()), config::check_owner)
                    .map(|_| kt)
            })
            .and_then(|kt| match (opts.shared, &opts.owner) {
                (true, Some(_)) => Err(Error::invalid(
                    "a shared lock has no owner: ask for shared or for an owner (reentrant), \
                     not both",
                )),
                _ => Ok(kt),
            })
            .and_then(|kt| check_fair(opts).map(|_| kt))
    }

    /// A fair acquisition (see [`LockOptions::fair`]); the input is checked.
    fn acquire_fair(
        &self,
        resource: &[u8],
        key: &[u8],
        ttl: Ttl,
        opts: &LockOptions,
    ) -> Result<Lease, Error> {
        let sh = &self.shared;
        let drop_out = opts.drop_out.unwrap_or(
            ttl.duration()
                .min(config::DEFAULT_DROP_OUT)
                .max(config::MIN_DROP_OUT),
        );
        let mut fair = lock::Fair::new(sh, resource, key, drop_out, opts.wait != Wait::No)?;
        let mut opts = opts.clone();
        opts.refresh = Some(drop_out / 5);
        let channel = fair.channel();
        let r = acquire::acquire(sh, &opts, &channel, || fair.attempt(sh, ttl, opts.fenced));
        if r.is_err() {
            fair.leave(sh);
        }
        r
    }

    /// Counts an acquisition refused for its input, and hands the error back.
    fn refused_input(&self, e: Error) -> Error {
        self.shared
            .cluster
            .metrics
            .acquisition::<()>(&Err(e.clone()), Duration::ZERO);
        e
    }

    /// Acquires **every** resource of `resources` for `ttl`, or none: one lease that covers
    /// them all. Unlock, extend, validity and auto-renewal act on the whole set.
    ///
    /// Each node sets all of the resources' keys or none, in one script
    /// ([`scripts::MULTI_ACQUIRE`]; a cluster node, one per slot, its part taken back unless
    /// every slot granted), so callers naming overlapping sets in any order never deadlock:
    /// none waits while it holds a part. The lock is held when a quorum of nodes granted all
    /// (with validity left); otherwise the grants are taken back everywhere. The keys are a
    /// plain lock's, so a lease over `{a, b}` and a plain or shared lease on `b` exclude each
    /// other. Each step stays one round trip, whatever the count.
    ///
    /// Waiting ([`LockOptions::wait`]) retries after random pauses of up to the retry delay
    /// (never waiting for a release announcement, which names one resource), and queues an
    /// exclusive waiter's intent against shared holders of any of the resources (see
    /// [`LockOptions::shared`]). The lease's [`resources`](Lease::resources) lists them.
    ///
    /// Errors: [`Error::InvalidInput`] (nothing is sent) for no resources, more than
    /// [`MAX_RESOURCES`](crate::MAX_RESOURCES), a resource named twice, an invalid resource
    /// name or TTL, or options this call does not take: [`shared`](LockOptions::shared),
    /// [`owner`](LockOptions::owner) and [`fenced`](LockOptions::fenced) (lock such
    /// resources one at a time); otherwise as [`acquire`](Self::acquire).
    pub fn acquire_many<R: AsRef<[u8]>>(
        &self,
        resources: &[R],
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<Lease, Error> {
        let sh = &self.shared;
        let resources: Vec<Vec<u8>> = resources.iter().map(|r| r.as_ref().to_vec()).collect();
        let (keys, ttl) = match self.check_many(&resources, ttl, opts) {
            Ok(checked) => checked,
            Err(e) => return Err(self.refused_input(e)),
        };
        let mut intent = match opts.wait {
            Wait::No => None,
            _ => Some(lock::Intent::new(&keys, ttl)),
        };
        let opts = opts.clone().notify(false);
        let r = acquire::acquire(sh, &opts, &keys[0], || {
            let r = lock::attempt_many(sh, &resources, &keys, ttl);
            if let (Err(Error::NotAcquired(_)), Some(i)) = (&r, intent.as_mut()) {
                i.queue(sh);
            }
            r
        });
        if let Some(i) = &intent {
            i.finish(sh, r.is_err());
        }
        r
    }

    /// The lock keys of `resources`, or why they cannot be acquired together.
    fn check_many(
        &self,
        resources: &[Vec<u8>],
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<(Vec<Vec<u8>>, Ttl), Error> {
        let cfg = &self.shared.cfg;
        if resources.is_empty() {
            return Err(Error::invalid("no resources: name at least one"));
        }
        if resources.len() > config::MAX_RESOURCES {
            return Err(Error::invalid(format!(
                "{} resources; the limit is {} per call",
                resources.len(),
                config::MAX_RESOURCES
            )));
        }
        let not_here = if opts.shared {
            Some("shared")
        } else if opts.owner.is_some() {
            Some("owner (reentrant)")
        } else if opts.fenced {
            Some("fenced")
        } else if opts.fair || opts.drop_out.is_some() {
            Some("fair")
        } else {
            None
        };
        if let Some(what) = not_here {
            return Err(Error::invalid(format!(
                "acquire_many takes exclusive, unfenced locks only; for {what} locks, acquire \
                 each resource on its own"
            )));
        }
        let ttl = Ttl::new(ttl, cfg)?;
        if let Some(r) = &opts.auto_renew {
            r.validate()?;
        }
        let mut keys = Vec::with_capacity(resources.len());
        let mut seen = std::collections::HashMap::with_capacity(resources.len());
        for (i, r) in resources.iter().enumerate() {
            let key = cfg.lock_key(r).map_err(|e| match e {
                Error::InvalidInput(m) => Error::invalid(format!("resource {i}: {m}")),
                other => other,
            })?;
            if let Some(j) = seen.insert(key.clone(), i) {
                return Err(Error::invalid(format!(
                    "resource {i} ({:?}) is resource {j} again: name each resource once",
                    String::from_utf8_lossy(r)
                )));
            }
            keys.push(key);
        }
        Ok((keys, ttl))
    }

    fn with_wait(
        &self,
        resource: &[u8],
        ttl: Duration,
        wait: Wait,
        fenced: bool,
    ) -> Result<Lease, Error> {
        self.acquire(resource, ttl, &LockOptions::new().wait(wait).fenced(fenced))
    }

    /// One attempt to acquire `resource` for `ttl`, with no retry (see
    /// [`acquire`](Self::acquire)).
    pub fn try_lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lease, Error> {
        self.with_wait(resource.as_ref(), ttl, Wait::No, false)
    }

    /// Acquires `resource` for `ttl`, retrying up to the configured retry count (3 by default)
    /// after a random pause of up to the retry delay (200 ms by default). Returns the last
    /// attempt's error when every attempt failed. Never waits forever.
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lease, Error> {
        self.with_wait(resource.as_ref(), ttl, Wait::Retries, false)
    }

    /// Acquires `resource` for `ttl`, retrying after random pauses (up to the retry delay)
    /// until `deadline`; no attempt starts after it. The retry count does not apply.
    pub fn lock_until(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lease, Error> {
        self.with_wait(resource.as_ref(), ttl, Wait::Until(deadline), false)
    }

    /// [`lock_until`](Self::lock_until) with a deadline `wait` from now.
    pub fn lock_timeout(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, Error> {
        self.with_wait(resource.as_ref(), ttl, Wait::For(wait), false)
    }

    /// Like [`try_lock`](Self::try_lock), and the lease carries a **fencing token**
    /// ([`Lease::fencing_token`]): a number strictly greater than the token of every earlier
    /// fenced grant of the same resource, as long as a majority of the nodes keeps its data.
    /// Storage that accepts writes only with a token larger than any it has seen turns away a
    /// holder that was paused past its lease (see [`scripts::FENCED_STORE_WRITE`]).
    ///
    /// It costs a second round trip. Step one is `SET NX PX` plus a read of the resource's
    /// counter `redlock-fence:<resource>` on each node; the token is `T = max + 1` over the
    /// granting quorum. Step two writes `T` back to the counters, only where the key still
    /// holds our token, and the lock is granted only if a quorum confirms that within the
    /// validity. Any later grant's quorum intersects that quorum, so it reads at least `T`.
    ///
    /// The counters never expire. A node restarted without persistence loses them; once a
    /// majority has lost the latest one, a later token can be smaller than an earlier one.
    /// Restart quarantine does not prevent that: run the nodes with `appendfsync always` when
    /// fencing must survive restarts.
    pub fn try_lock_fenced(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<Lease, Error> {
        self.with_wait(resource.as_ref(), ttl, Wait::No, true)
    }

    /// [`lock`](Self::lock) with a fencing token (see [`try_lock_fenced`](Self::try_lock_fenced)).
    pub fn lock_fenced(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lease, Error> {
        self.with_wait(resource.as_ref(), ttl, Wait::Retries, true)
    }

    /// [`lock_until`](Self::lock_until) with a fencing token (see
    /// [`try_lock_fenced`](Self::try_lock_fenced)).
    pub fn lock_fenced_until(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lease, Error> {
        self.with_wait(resource.as_ref(), ttl, Wait::Until(deadline), true)
    }
}

/// Checks the options of a fair acquisition: not reentrant, not shared, a valid drop-out time.
fn check_fair(opts: &LockOptions) -> Result<(), Error> {
    if !opts.fair {
        return match opts.drop_out {
            Some(_) => Err(Error::invalid(
                "a drop-out time is for a fair lock's waiters: ask for fair too, or leave it out",
            )),
            None => Ok(()),
        };
    }
    if opts.owner.is_some() || opts.shared {
        return Err(Error::invalid(
            "a fair lock is neither reentrant nor shared: leave out owner and shared, or fair",
        ));
    }
    opts.drop_out.map_or(Ok(()), config::check_drop_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::ManualClock;

    #[test]
    fn bad_input_is_rejected_before_any_io() {
        let mgr = Redlock::new(Config::new(["127.0.0.1:1"])).unwrap();
        for (res, ttl) in [
            (&b""[..], Duration::from_secs(1)),
            (&[b'x'; 1025][..], Duration::from_secs(1)),
            (&b"r"[..], Duration::ZERO),
            (&b"r"[..], Duration::from_millis(2)),
            (&b"r"[..], config::MAX_TTL + Duration::from_millis(1)),
        ] {
            assert!(matches!(
                mgr.try_lock(res, ttl),
                Err(Error::InvalidInput(_))
            ));
            assert!(matches!(mgr.lock(res, ttl), Err(Error::InvalidInput(_))));
        }
        assert_eq!(mgr.metrics().invalid_input, 10);
        assert_eq!(mgr.metrics().acquire_attempts, 0);
    }

    #[test]
    fn check_acquire_refuses_what_acquire_refuses_and_counts_nothing() {
        let mgr = Redlock::new(Config::new(["127.0.0.1:1"])).unwrap();
        let ttl = Duration::from_secs(1);
        let conflicts = [
            LockOptions::new().shared(true).owner(b"o"),
            LockOptions::new().fair(true).owner(b"o"),
            LockOptions::new().fair(true).shared(true),
            LockOptions::new().drop_out(Duration::from_secs(1)),
        ];
        for opts in &conflicts {
            let checked = mgr.check_acquire("r", ttl, opts);
            let acquired = mgr.acquire("r", ttl, opts);
            match (checked, acquired) {
                (Err(Error::InvalidInput(a)), Err(Error::InvalidInput(b))) => assert_eq!(a, b),
                other => panic!("{opts:?}: {other:?}"),
            }
        }
        assert!(mgr.check_acquire("r", ttl, &LockOptions::new()).is_ok());
        assert!(mgr.check_acquire("", ttl, &LockOptions::new()).is_err());
        let many = |rs: &[&str], opts: &LockOptions| mgr.check_acquire_many(rs, ttl, opts);
        assert!(many(&["a", "b"], &LockOptions::new()).is_ok());
        assert!(many(&[], &LockOptions::new()).is_err());
        assert!(many(&["a", "a"], &LockOptions::new()).is_err());
        assert!(many(&["a", "b"], &LockOptions::new().fenced(true)).is_err());
        // Only the acquisitions were counted: the checks are not.
        assert_eq!(mgr.metrics().invalid_input, conflicts.len() as u64);
        assert_eq!(mgr.metrics().acquire_attempts, 0);
    }

    #[test]
    fn lease_validity_follows_an_injected_clock() {
        let clock = Arc::new(ManualClock::new());
        let mgr = Redlock::with_clock(Config::new(["127.0.0.1:1"]), clock.clone()).unwrap();
        let sh = &mgr.shared;
        let start = clock.now();
        let ttl = Duration::from_millis(1000);
        let lease = Lease::new(
            sh,
            crate::lease::Granted {
                resource: b"r".to_vec(),
                key: b"redlock:r".to_vec(),
                token: "0".repeat(40),
                kind: Box::new(crate::lock::plain::Plain),
                fencing_token: None,
                ttl: Ttl::new(ttl, &sh.cfg).unwrap(),
                start,
                expires: sh.budget.expiry(start, ttl),
                acquisition: sh.no_io(crate::Op::Acquire, "test"),
            },
        );
        // drift = 10 ms + 2 ms
        assert_eq!(lease.validity(), Duration::from_millis(988));
        clock.advance(Duration::from_millis(500));
        assert_eq!(lease.validity(), Duration::from_millis(488));
        assert!(lease.is_valid());
        clock.advance(Duration::from_millis(488));
        assert_eq!(lease.validity(), Duration::ZERO);
        assert!(!lease.is_valid());
        clock.advance(Duration::from_secs(10));
        assert_eq!(lease.validity(), Duration::ZERO);
        // Extend refuses an expired lease without any I/O (node 127.0.0.1:1 is never
        // contacted: the report has no node lines).
        match lease.extend(Duration::from_secs(1)) {
            Err(Error::NotHeld(r)) => assert!(r.nodes.is_empty(), "{r}"),
            other => panic!("{other:?}"),
        }
        // So do renewal and unlock-after-expiry's local checks.
        assert!(matches!(
            lease.auto_renew(crate::RenewOptions::new()),
            Err(Error::NotHeld(_))
        ));
    }
}
