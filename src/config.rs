//! Options with their defaults, validation, and node addresses.

use std::time::Duration;

use crate::error::Error;
use crate::timing::Budget;
use crate::tls::TlsOptions;

mod addr;
mod lookup;

pub use addr::{NodeAddr, SENTINEL_PORT};
pub(crate) use lookup::{Lookups, Resolver};

/// The credentials a failover group's sentinels ask for (see [`Config::sentinel_auth`]).
/// Its `Debug` form never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SentinelAuth {
    pub username: Option<String>,
    pub password: String,
}

impl std::fmt::Debug for SentinelAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SentinelAuth({:?}, ***)", self.username)
    }
}

/// The largest TTL any lock may have: `u32::MAX` milliseconds (about 49.7 days). This is also
/// the range of the C API's `uint32_t ttl_ms`.
pub const MAX_TTL: Duration = Duration::from_millis(u32::MAX as u64);

/// The longest resource name accepted, in bytes.
pub const MAX_RESOURCE_LEN: usize = 1024;

/// The default of [`Config::max_ttl`]: 60 s.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(60);

/// The default prefix of every lock key: the key for resource `R` is `redlock:` followed by the
/// bytes of `R`. A prefix keeps lock keys in a namespace of their own; another one (the empty
/// one included) is set with [`Config::key_prefix`].
pub const KEY_PREFIX: &[u8] = b"redlock:";

/// The longest key prefix accepted by [`Config::key_prefix`], in bytes.
pub const MAX_KEY_PREFIX_LEN: usize = 256;

/// The longest holder label accepted by [`Config::label`], in bytes.
pub const MAX_LABEL_LEN: usize = 256;

/// The prefix of every fencing counter key: `redlock-fence:` followed by the resource. No lock
/// key can equal a counter key: the prefixes differ at their eighth byte (`:` against `-`).
pub const FENCE_PREFIX: &[u8] = b"redlock-fence:";

/// The prefix of an exclusive waiter's intent key: `redlock-intent:` followed by the lock key.
/// While it stands on a node, new shared holds of that lock wait (see
/// [`LockOptions::shared`](crate::LockOptions::shared)).
pub const INTENT_PREFIX: &[u8] = b"redlock-intent:";

/// The prefix of a semaphore's key: `redlock-sem:` followed by the lock key its name would
/// have (see [`Redlock::semaphore`](crate::Redlock::semaphore)). No lock key can start with it,
/// so a semaphore and a lock of the same name never share a key.
pub const SEMAPHORE_PREFIX: &[u8] = b"redlock-sem:";

/// The prefix of an election's key: `redlock-elect:` followed by the lock key its name would
/// have (see [`Redlock::election`](crate::Redlock::election)). No lock key can start with it,
/// so an election and a lock of the same name never share a key.
pub const ELECTION_PREFIX: &[u8] = b"redlock-elect:";

/// The prefix of an election's leader record: `redlock-leader:` followed by the election's
/// key (on a manager with a cluster node, its companion name in the key's slot). A hash of the
/// current leader's token, term, proclamation number and value; its name is also the channel
/// where each new term and value is announced.
pub const LEADER_PREFIX: &[u8] = b"redlock-leader:";

/// The prefix of a fair lock's queue: `redlock-fair:` followed by the lock key. Each node keeps
/// one hash there per fair-locked resource, one entry per waiter (see
/// [`LockOptions::fair`](crate::LockOptions::fair)); a waiter's wake-up channel is the queue's
/// name, `:`, and its lock value.
pub const FAIR_PREFIX: &[u8] = b"redlock-fair:";

/// The prefix of a fair lock's ticket counter: `redlock-fair-tickets:` followed by the lock
/// key. It lives as long as the queue ([`FAIR_PREFIX`]) and orders the tickets queued there; it
/// is not the fencing counter, which a reentrant holder's tenure reads.
pub const FAIR_TICKETS_PREFIX: &[u8] = b"redlock-fair-tickets:";

/// The drop-out time of a fair acquisition that sets none
/// ([`LockOptions::drop_out`](crate::LockOptions::drop_out)): this, or the lock's TTL if
/// shorter.
pub const DEFAULT_DROP_OUT: Duration = Duration::from_secs(5);

/// The shortest drop-out time [`LockOptions::drop_out`](crate::LockOptions::drop_out) takes.
pub const MIN_DROP_OUT: Duration = Duration::from_millis(20);

/// The longest drop-out time [`LockOptions::drop_out`](crate::LockOptions::drop_out) takes.
pub const MAX_DROP_OUT: Duration = Duration::from_secs(3600);

/// The most permits a semaphore may have: each acquisition looks at every slot on each node,
/// in one script, which blocks that node meanwhile.
pub const MAX_PERMITS: u32 = 1000;

/// The most resources one [`Redlock::acquire_many`](crate::Redlock::acquire_many) call may
/// name: each node sets or checks them all in one script, which blocks that node meanwhile.
pub const MAX_RESOURCES: usize = 1000;

/// The key of restart quarantine's marker on every node: it holds the node's `run_id` as of
/// the time the node was last trusted, and has no TTL. It is outside both the lock namespace
/// (`redlock:`) and the fencing counters (`redlock-fence:`), so no resource name can alias it.
pub const MARKER_KEY: &[u8] = b"redlock-marker";

/// The key of restart quarantine's loss note on a node: a manager that puts the node in
/// quarantine because it lost its keyspace (a restart, a flush, a promotion) writes it, with a
/// TTL of two maximum TTLs, so that a manager meeting the cluster later does not mistake a
/// cluster whose every node restarted within the maximum TTL for a brand-new one. It holds the
/// lost server's `run_id` and why. On a cluster node each shard primary holds one, tagged like
/// its lowest slot's marker (`redlock-marker-lost:{TAG}`).
pub const LOSS_NOTE_KEY: &[u8] = b"redlock-marker-lost";

/// Configuration for a [`Redlock`](crate::Redlock) manager.
///
/// Every option has a documented default; [`Redlock::new`](crate::Redlock::new) validates the
/// whole configuration and fails with [`Error::InvalidInput`] before any connection is made.
///
/// ```
/// use std::time::Duration;
/// let cfg = redlock::Config::new(["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])
///     .retry_count(5)
///     .retry_delay(Duration::from_millis(100));
/// assert_eq!(cfg.node_urls().len(), 3);
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) nodes: Vec<String>,
    pub(crate) retry_count: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) connect_timeout: Duration,
    pub(crate) node_timeout: Option<Duration>,
    pub(crate) node_timeout_floor: Duration,
    pub(crate) node_timeout_cap: Duration,
    pub(crate) node_timeout_fraction: f64,
    pub(crate) stale_limit: Duration,
    pub(crate) reconnect_backoff_min: Duration,
    pub(crate) reconnect_backoff_max: Duration,
    pub(crate) max_idle_connection_sets: usize,
    pub(crate) max_ttl: Duration,
    pub(crate) restart_quarantine: bool,
    pub(crate) key_prefix: Vec<u8>,
    pub(crate) label: Option<String>,
    pub(crate) tls: TlsOptions,
    pub(crate) sentinel_auth: Option<SentinelAuth>,
    pub(crate) replica_acks: Option<(u32, Duration)>,
    pub(crate) resolver: Resolver,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            nodes: Vec::new(),
            retry_count: 3,
            retry_delay: Duration::from_millis(200),
            drift_factor: 0.01,
            connect_timeout: Duration::from_millis(250),
            node_timeout: None,
            node_timeout_floor: Duration::from_millis(10),
            node_timeout_cap: Duration::from_secs(1),
            node_timeout_fraction: 0.1,
            stale_limit: Duration::from_secs(1),
            reconnect_backoff_min: Duration::from_millis(20),
            reconnect_backoff_max: Duration::from_secs(1),
            max_idle_connection_sets: 32,
            max_ttl: DEFAULT_MAX_TTL,
            restart_quarantine: true,
            key_prefix: KEY_PREFIX.to_vec(),
            label: None,
            tls: TlsOptions::default(),
            sentinel_auth: None,
            replica_acks: None,
            resolver: Resolver::system(),
        }
    }
}

impl Config {
    /// A configuration with the given nodes and every other option at its default.
    pub fn new<I, S>(nodes: I) -> Config
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Config {
            nodes: nodes.into_iter().map(Into::into).collect(),
            ..Config::default()
        }
    }

    /// Adds one node: `redis://[user:password@]host[:port][/db]` or `host:port`. The nodes
    /// must be independent masters (no replication between them), each listed once.
    pub fn node(mut self, url: impl Into<String>) -> Config {
        self.nodes.push(url.into());
        self
    }

    /// The node URLs as given (passwords included; do not log them).
    pub fn node_urls(&self) -> &[String] {
        &self.nodes
    }

    /// How many more attempts [`Redlock::lock`](crate::Redlock::lock) makes after a failed
    /// first one. Defaults to 3 (so at most 4 attempts).
    pub fn retry_count(mut self, n: u32) -> Config {
        self.retry_count = n;
        self
    }

    /// The upper bound of the random pause before each retry: each pause is drawn uniformly
    /// from `[0, delay]` ("full jitter"), so that contending clients spread out. Defaults to
    /// 200 ms.
    pub fn retry_delay(mut self, delay: Duration) -> Config {
        self.retry_delay = delay;
        self
    }

    /// The clock-drift factor: a lock's validity is shortened by `TTL × factor + 2 ms` to
    /// allow for clocks on the nodes running at different rates. Must be in `[0, 1)`.
    /// Defaults to 0.01.
    pub fn drift_factor(mut self, factor: f64) -> Config {
        self.drift_factor = factor;
        self
    }

    /// How long to wait for a TCP connection to a node to be established (and its TLS
    /// handshake, for `rediss://`), in addition to the per-node timeout of the step that
    /// needed it. Must be > 0. Defaults to 250 ms.
    pub fn connect_timeout(mut self, t: Duration) -> Config {
        self.connect_timeout = t;
        self
    }

    /// Overrides how long each step waits for the nodes' replies once its command is sent:
    /// the same for every node and every kind of step (an extension still stops at the
    /// current validity's end). Must be > 0.
    ///
    /// By default each kind of step has the bound the algorithm needs. A step returns as soon
    /// as its outcome is decided (a quorum succeeded, or can no longer succeed), so a slow
    /// minority is never waited for; a bound matters only while the nodes needed for a quorum
    /// have not all answered, and then waiting longer can only help. So a node is called
    /// timed out only when it missed a bound that a healthy node on a busy machine meets:
    ///
    /// * an acquisition (and the fencing step) waits the *acquire bound*: a fraction of the
    ///   lock's TTL ([`node_timeout_fraction`](Self::node_timeout_fraction), a tenth), at
    ///   least [`node_timeout_floor`](Self::node_timeout_floor) (10 ms) and at most
    ///   [`node_timeout_cap`](Self::node_timeout_cap) (1 s): a dead node never eats more
    ///   than a tenth of the validity, and a node 60 ms away counts with a 1 s TTL;
    /// * an extension waits until the current validity ends, after which it could not count;
    /// * a release waits the [`stale_limit`](Self::stale_limit) (1 s), and a release it could
    ///   not confirm in that time is reported as not confirmed, not as refused;
    /// * auto-renewal waits the acquire bound, within the lease's validity.
    ///
    /// Each adds 50 µs per key or semaphore slot the command touches beyond the first
    /// ([`WORK_ALLOWANCE`](crate::WORK_ALLOWANCE)), so a script over 1,000 keys gets
    /// 50 ms more than a one-key `SET`; an explicit timeout gets that allowance too. Before a
    /// node is declared timed out, whatever its socket already holds is read: a reply that
    /// arrived while this thread was not running is not a timeout.
    pub fn node_timeout(mut self, t: Duration) -> Config {
        self.node_timeout = Some(t);
        self
    }

    /// Undoes [`node_timeout`](Self::node_timeout): each kind of step waits its own bound
    /// again (the default).
    pub fn derived_node_timeout(mut self) -> Config {
        self.node_timeout = None;
        self
    }

    /// The smallest acquire bound, whatever the TTL (see [`node_timeout`](Self::node_timeout)).
    /// Must be > 0. Defaults to 10 ms.
    pub fn node_timeout_floor(mut self, t: Duration) -> Config {
        self.node_timeout_floor = t;
        self
    }

    /// The largest acquire bound, whatever the TTL (see [`node_timeout`](Self::node_timeout)).
    /// Must be at least the floor. Defaults to 1 s.
    pub fn node_timeout_cap(mut self, t: Duration) -> Config {
        self.node_timeout_cap = t;
        self
    }

    /// The acquire bound as a fraction of the lock's TTL, within the floor and the cap (see
    /// [`node_timeout`](Self::node_timeout)). Must be in (0, 1]. Defaults to 0.1: an
    /// acquisition never spends more than a tenth of the lock's validity waiting for a node.
    pub fn node_timeout_fraction(mut self, f: f64) -> Config {
        self.node_timeout_fraction = f;
        self
    }

    /// How long a connection may owe a reply while delivering none (plus the
    /// [`WORK_ALLOWANCE`](crate::WORK_ALLOWANCE) of the commands it owes) before it is closed and
    /// the node reconnected (replies that arrive after the step that asked for them are read
    /// and discarded, so a slow node does not need a new connection, but one that never
    /// answers does). A node that keeps answering is busy, not hung: its connection is closed
    /// only once its oldest owed reply has waited ten stale limits. Also how long a release
    /// waits for the nodes (see [`node_timeout`](Self::node_timeout)). Must be > 0. Defaults
    /// to 1 s.
    pub fn stale_limit(mut self, t: Duration) -> Config {
        self.stale_limit = t;
        self
    }

    /// The reconnect backoff after a node fails: no new connection is attempted for `min`,
    /// doubling with each consecutive failure up to `max`. Both must be > 0 and `min <= max`.
    /// Defaults to 20 ms and 1 s.
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Config {
        self.reconnect_backoff_min = min;
        self.reconnect_backoff_max = max;
        self
    }

    /// Ignored: a manager keeps one connection per node, shared by all its threads (see
    /// ARCHITECTURE.md), so there are no idle connection sets to bound. Still validated (at
    /// least 1) so that configurations that set it keep working. Defaults to 32.
    #[deprecated(note = "a manager keeps one connection per node; this setting has no effect")]
    pub fn max_idle_connection_sets(mut self, n: usize) -> Config {
        self.max_idle_connection_sets = n;
        self
    }

    /// The largest TTL a lock of this manager may have; a larger one is invalid input. It is
    /// also how long a restarted node stays in quarantine. At most [`MAX_TTL`]. Defaults to
    /// 60 s (hold locks longer with auto-renewal).
    pub fn max_ttl(mut self, t: Duration) -> Config {
        self.max_ttl = t;
        self
    }

    /// Restart quarantine (on by default): a node that may have lost the keys it held does
    /// not count toward a quorum until the maximum TTL has passed (unlocks and renewals still
    /// go to it). Whether it may have is told by its marker, the key
    /// [`MARKER_KEY`](crate::MARKER_KEY), which holds the node's `run_id` as of the time it was
    /// last trusted: a stale or missing marker means a restart or a flushed keyspace. A
    /// brand-new cluster (no node has a marker, every node younger than the maximum TTL) is
    /// trusted at once. See docs/operations.md, "Restart quarantine", for the whole rule and
    /// why it is safe.
    ///
    /// Turn it off only for nodes that persist every write (`appendonly yes`,
    /// `appendfsync always`); with it off, no marker is read or written, and a warning is
    /// logged once for each node that does not persist every write.
    pub fn restart_quarantine(mut self, on: bool) -> Config {
        self.restart_quarantine = on;
        self
    }

    /// The prefix of every lock key: the key of resource `R` is the prefix followed by the bytes
    /// of `R`. Defaults to [`KEY_PREFIX`] (`redlock:`); at most [`MAX_KEY_PREFIX_LEN`] bytes,
    /// any bytes, the empty prefix included.
    ///
    /// The empty prefix makes the key the resource name itself, as redsync and node-redlock
    /// name theirs: a plain lock here is the same `SET key value NX PX ttl` and the same
    /// compare-and-delete, so during a migration a service using this library and one still
    /// on those libraries exclude each other on the same resource. (Reentrant locks keep a
    /// hash under the key, which those libraries' `SET NX` also respects.) Whatever the
    /// prefix, a lock key may not fall in this library's own namespaces (`redlock-fence:`,
    /// `redlock-marker`): acquiring such a resource is invalid input. Releases are announced
    /// on a Pub/Sub channel named after the key, so under the empty prefix the channel is the
    /// resource name.
    pub fn key_prefix(mut self, prefix: impl AsRef<[u8]>) -> Config {
        self.key_prefix = prefix.as_ref().to_vec();
        self
    }

    /// The configured key prefix (see [`key_prefix`](Self::key_prefix)).
    pub fn key_prefix_bytes(&self) -> &[u8] {
        &self.key_prefix
    }

    /// A label naming this holder (for example `host:pid`), stored beside the token in the
    /// value of every plain lock this manager takes, so that [`Redlock::holders`](crate::Redlock::holders)
    /// (crate::Redlock::holders) and `redlock inspect` can say who holds a resource. At most
    /// [`MAX_LABEL_LEN`] bytes of UTF-8 with no control characters; the empty string means no
    /// label (the default). A reentrant lock is labelled by its owner id instead.
    ///
    /// The label is readable by anyone who can read the keys: do not put secrets in it.
    pub fn label(mut self, label: impl Into<String>) -> Config {
        let label = label.into();
        self.label = (!label.is_empty()).then_some(label);
        self
    }

    /// TLS for the `rediss://` nodes: the CA file (else the system's trust store), a client
    /// certificate, a server name, or no verification at all (tests only). Its files are read
    /// by [`Redlock::new`](crate::Redlock::new). Defaults to [`TlsOptions::new`].
    pub fn tls(mut self, options: TlsOptions) -> Config {
        self.tls = options;
        self
    }

    /// The failover groups' options: replica acknowledgements (at least one, a timeout), and
    /// the sentinels' credentials (a password, and a user name that is not empty).
    /// Every duration option is at most [`MAX_TTL`] (2^32 - 1 ms, about 49.7 days): past the
    /// clock's range, a deadline made from one would overflow in the middle of a call.
    fn check_upper_bounds(&self) -> Result<(), Error> {
        let bounded = [
            ("retry delay", Some(self.retry_delay)),
            ("connect timeout", Some(self.connect_timeout)),
            ("node timeout", self.node_timeout),
            ("node timeout floor", Some(self.node_timeout_floor)),
            ("node timeout cap", Some(self.node_timeout_cap)),
            ("stale limit", Some(self.stale_limit)),
            (
                "minimum reconnect backoff",
                Some(self.reconnect_backoff_min),
            ),
            (
                "maximum reconnect backoff",
                Some(self.reconnect_backoff_max),
            ),
            (
                "replica acknowledgement timeout",
                self.replica_acks.map(|(_, t)| t),
            ),
        ];
        for (what, d) in bounded {
            if let Some(d) = d.filter(|d| *d > MAX_TTL) {
                return Err(Error::invalid(format!(
                    "{what} must be at most {} ms, got {} ms",
                    MAX_TTL.as_millis(),
                    d.as_millis()
                )));
            }
        }
        Ok(())
    }

    fn check_group_options(&self) -> Result<(), Error> {
        if let Some((n, t)) = self.replica_acks {
            if n == 0 {
                return Err(Error::invalid(
                    "replica acknowledgements: at least 1 replica (or do not set the option)",
                ));
            }
            if t.is_zero() {
                return Err(Error::invalid(
                    "replica acknowledgement timeout must be > 0 (WAIT 0 would wait forever)",
                ));
            }
        }
        let Some(a) = &self.sentinel_auth else {
            return Ok(());
        };
        if a.password.is_empty() {
            return Err(Error::invalid("the sentinels' password must not be empty"));
        }
        if a.username.as_deref() == Some("") {
            return Err(Error::invalid(
                "the sentinels' user name must not be empty (None means the default user)",
            ));
        }
        Ok(())
    }

    /// Makes a grant count on a failover group (`redis+sentinel://`) only once `replicas` of
    /// its master's replicas have acknowledged it: `WAIT replicas timeout` is written right
    /// behind every grant command, in the same write, and a grant that `WAIT` did not see
    /// acknowledged in time does not count (it is released, as a quarantined node's is; the
    /// node's outcome is [`NodeOutcome::Unacknowledged`](crate::NodeOutcome::Unacknowledged)).
    /// Each acquisition on a group then waits for its replication as well (up to `timeout`).
    ///
    /// What it buys: a failover to a replica that acknowledged the grant keeps the lock, and
    /// a master cut off from its replicas grants nothing that counts. What it does not:
    /// replication stays asynchronous, so a failover may still promote a replica that had not
    /// acknowledged (Sentinel picks by offset, not by `WAIT`), and restart quarantine is still
    /// needed. Plain nodes are not affected. `replicas` must be at least 1, `timeout` greater
    /// than zero. Defaults to none.
    pub fn replica_acks(mut self, replicas: u32, timeout: Duration) -> Config {
        self.replica_acks = Some((replicas, timeout));
        self
    }

    /// The credentials every failover group's sentinels are asked with (`AUTH [username]
    /// password` on each connection to a sentinel), when they differ from none: a
    /// `redis+sentinel://` URL's own credentials are its master's, as with `redis://`.
    /// `username` `None` authenticates as the default user. An empty password is refused by
    /// [`Redlock::new`](crate::Redlock::new). Defaults to none (sentinels without
    /// `requirepass`).
    pub fn sentinel_auth(mut self, username: Option<&str>, password: &str) -> Config {
        self.sentinel_auth = Some(SentinelAuth {
            username: username.map(str::to_string),
            password: password.to_string(),
        });
        self
    }

    /// The TLS options (see [`tls`](Self::tls)).
    pub fn tls_options(&self) -> &TlsOptions {
        &self.tls
    }

    /// The configured holder label, if any (see [`label`](Self::label)).
    pub fn label_str(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The lock key of `resource` under this configuration's prefix: invalid input when the
    /// resource is not a valid name, or when the key would fall in one of the library's own
    /// namespaces (possible only with a prefix other than the default).
    pub fn lock_key(&self, resource: &[u8]) -> Result<Vec<u8>, Error> {
        check_resource(resource)?;
        let key = [self.key_prefix.as_slice(), resource].concat();
        if own_key(&key) {
            return Err(Error::invalid(format!(
                "the lock key of this resource would be {:?}, in the library's own namespace \
                 (`redlock-fence:` counters, `redlock-intent:`, `redlock-sem:`, `redlock-fair`, \
                 `redlock-elect:` and `redlock-leader:` keys, `redlock-marker`); choose another resource name or key prefix",
                String::from_utf8_lossy(&key)
            )));
        }
        Ok(key)
    }

    /// The key of the semaphore `name`: [`SEMAPHORE_PREFIX`] followed by the lock key `name`
    /// would have; invalid input as [`lock_key`](Self::lock_key).
    pub fn semaphore_key(&self, name: &[u8]) -> Result<Vec<u8>, Error> {
        Ok([SEMAPHORE_PREFIX, &self.lock_key(name)?].concat())
    }

    /// The key of the election `name`: [`ELECTION_PREFIX`] followed by the lock key `name`
    /// would have; invalid input as [`lock_key`](Self::lock_key).
    pub fn election_key(&self, name: &[u8]) -> Result<Vec<u8>, Error> {
        Ok([ELECTION_PREFIX, &self.lock_key(name)?].concat())
    }

    /// The acquire bound of a lock with this TTL: how long an acquisition of one key waits
    /// for the nodes while no quorum has answered. The explicit
    /// [`node_timeout`](Self::node_timeout) if set, else `TTL × fraction`, at most the cap,
    /// at least the floor. See [`node_timeout`](Self::node_timeout) for the other steps.
    pub fn node_timeout_for(&self, ttl: Duration) -> Duration {
        self.budget().acquire_bound(ttl)
    }

    /// The timing rules these options give.
    pub(crate) fn budget(&self) -> Budget {
        Budget {
            drift_factor: self.drift_factor,
            node_timeout: self.node_timeout,
            floor: self.node_timeout_floor,
            cap: self.node_timeout_cap,
            fraction: self.node_timeout_fraction,
            release: self.stale_limit,
        }
    }

    /// Checks that a drift factor is usable: finite and in `[0, 1)`.
    pub fn check_drift_factor(factor: f64) -> Result<(), Error> {
        if factor.is_finite() && (0.0..1.0).contains(&factor) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "drift factor must be in [0, 1), got {factor}"
            )))
        }
    }

    /// Checks a holder label (see [`label`](Self::label)): at most [`MAX_LABEL_LEN`] bytes,
    /// no control characters.
    pub fn check_label(label: &str) -> Result<(), Error> {
        if label.len() > MAX_LABEL_LEN {
            return Err(Error::invalid(format!(
                "label is {} bytes; the limit is {MAX_LABEL_LEN}",
                label.len()
            )));
        }
        if label.chars().any(char::is_control) {
            return Err(Error::invalid("label must not contain control characters"));
        }
        Ok(())
    }

    /// Checks a key prefix (see [`key_prefix`](Self::key_prefix)): at most
    /// [`MAX_KEY_PREFIX_LEN`] bytes.
    pub fn check_key_prefix(prefix: &[u8]) -> Result<(), Error> {
        if prefix.len() > MAX_KEY_PREFIX_LEN {
            return Err(Error::invalid(format!(
                "key prefix is {} bytes; the limit is {MAX_KEY_PREFIX_LEN}",
                prefix.len()
            )));
        }
        Ok(())
    }

    /// Checks TLS options now, as [`Redlock::new`](crate::Redlock::new) does: the server
    /// name's syntax, and that each file set can be read and holds the PEM it should (without
    /// the `tls` feature: only that the files can be read). The error names the file, never
    /// its content.
    pub fn check_tls(options: &TlsOptions) -> Result<(), Error> {
        options.check().map_err(Error::InvalidInput)
    }

    /// Validates every option and parses every node, without resolving host names.
    pub fn validate(&self) -> Result<Vec<NodeAddr>, Error> {
        if self.nodes.is_empty() {
            return Err(Error::invalid("at least one node is required"));
        }
        Self::check_drift_factor(self.drift_factor)?;
        let positive = [
            ("connect timeout", self.connect_timeout),
            ("node timeout floor", self.node_timeout_floor),
            ("node timeout cap", self.node_timeout_cap),
            ("stale limit", self.stale_limit),
            ("minimum reconnect backoff", self.reconnect_backoff_min),
            ("maximum reconnect backoff", self.reconnect_backoff_max),
        ];
        for (what, d) in positive {
            if d.is_zero() {
                return Err(Error::invalid(format!("{what} must be > 0")));
            }
        }
        self.check_group_options()?;
        self.check_upper_bounds()?;
        if self.node_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::invalid("node timeout must be > 0"));
        }
        let f = self.node_timeout_fraction;
        if !(f.is_finite() && f > 0.0 && f <= 1.0) {
            return Err(Error::invalid(format!(
                "node timeout fraction must be in (0, 1], got {f}"
            )));
        }
        if self.node_timeout_cap < self.node_timeout_floor {
            return Err(Error::invalid(
                "node timeout cap must not be below the node timeout floor",
            ));
        }
        if self.reconnect_backoff_max < self.reconnect_backoff_min {
            return Err(Error::invalid(
                "maximum reconnect backoff must not be below the minimum",
            ));
        }
        if self.max_ttl < Duration::from_millis(3) || self.max_ttl > MAX_TTL {
            return Err(Error::invalid(format!(
                "maximum TTL must be between 3 ms and {} ms, got {} ms",
                MAX_TTL.as_millis(),
                self.max_ttl.as_millis()
            )));
        }
        Self::check_key_prefix(&self.key_prefix)?;
        if let Some(label) = &self.label {
            Self::check_label(label)?;
        }
        self.tls.check_server_name().map_err(Error::InvalidInput)?;
        if self.max_idle_connection_sets == 0 {
            return Err(Error::invalid(
                "max idle connection sets must be at least 1",
            ));
        }
        let mut parsed: Vec<NodeAddr> = Vec::with_capacity(self.nodes.len());
        for (i, url) in self.nodes.iter().enumerate() {
            let addr = NodeAddr::parse(url).map_err(|e| match e {
                Error::InvalidInput(m) => Error::InvalidInput(format!("node {i}: {m}")),
                other => other,
            })?;
            if let Some(j) = parsed
                .iter()
                .position(|p| p.host().eq_ignore_ascii_case(addr.host()) && p.port() == addr.port())
            {
                return Err(Error::invalid(format!(
                    "node {i} ({addr}) is listed twice (also node {j}); the nodes must be \
                     distinct servers"
                )));
            }
            parsed.push(addr);
        }
        Ok(parsed)
    }
}

/// Checks a resource name: 1 to [`MAX_RESOURCE_LEN`] bytes, any bytes.
pub(crate) fn check_resource(resource: &[u8]) -> Result<(), Error> {
    if resource.is_empty() {
        return Err(Error::invalid("resource name must not be empty"));
    }
    if resource.len() > MAX_RESOURCE_LEN {
        return Err(Error::invalid(format!(
            "resource name is {} bytes; the limit is {MAX_RESOURCE_LEN}",
            resource.len()
        )));
    }
    Ok(())
}

/// The longest owner id of a reentrant lock, in bytes.
pub const MAX_OWNER_LEN: usize = 512;

/// The owner id of every shared hold (see `lock::shared`): empty, which [`check_owner`]
/// refuses, so no reentrant caller can name it.
pub(crate) const SHARED_OWNER: &[u8] = b"";

/// The owner field of every semaphore's hash (see `lock::semaphore`): its leases are holds in
/// that hash, released, extended and renewed by the reentrant scripts with this owner. The
/// hash lives under [`SEMAPHORE_PREFIX`], where no lock key is, so no caller's lock can meet it.
pub(crate) const SEMAPHORE_OWNER: &[u8] = b"\0semaphore";

/// Whether `key` lies in one of the library's own namespaces, where no lock key may.
pub(crate) fn own_key(key: &[u8]) -> bool {
    key.starts_with(FENCE_PREFIX)
        || key.starts_with(INTENT_PREFIX)
        || key.starts_with(SEMAPHORE_PREFIX)
        || key.starts_with(FAIR_PREFIX)
        || key.starts_with(FAIR_TICKETS_PREFIX)
        || key.starts_with(ELECTION_PREFIX)
        || key.starts_with(LEADER_PREFIX)
        || key == MARKER_KEY
        || key.starts_with(SLOT_MARKER_PREFIX)
        || key.starts_with(LOSS_NOTE_KEY)
}

/// The prefix of a cluster node's per-slot markers (see [`slot_marker`]).
const SLOT_MARKER_PREFIX: &[u8] = b"redlock-marker:";

/// The restart-quarantine marker of `slot` on a cluster node: `redlock-marker:{TAG}`, where
/// `TAG` hashes to the slot (`slot::slot_tag`). A script touches one slot, so a grant checks
/// the marker of its key's slot; every shard primary holds one per slot it owns.
pub(crate) fn slot_marker(slot: u16) -> Vec<u8> {
    let tag = crate::slot::slot_tag(slot);
    [SLOT_MARKER_PREFIX, b"{", tag.as_bytes(), b"}"].concat()
}

/// The loss note ([`LOSS_NOTE_KEY`]) of a cluster node's shard whose lowest slot is `slot`:
/// `redlock-marker-lost:{TAG}`, in the slot of that slot's marker.
pub(crate) fn slot_loss_note(slot: u16) -> Vec<u8> {
    let tag = crate::slot::slot_tag(slot);
    [LOSS_NOTE_KEY, b":{", tag.as_bytes(), b"}"].concat()
}

/// `cmd` with every argument that is exactly [`MARKER_KEY`] replaced by `slot`'s marker
/// ([`slot_marker`]): a grant's command as a cluster node's shard runs it. `cmd` is commands
/// as `resp::pack` writes them; no other argument of the library's commands is ever
/// `redlock-marker` (it is no lock key, no token, no script source).
pub(crate) fn with_slot_marker(cmd: &[u8], slot: u16) -> std::borrow::Cow<'_, [u8]> {
    const BULK: &[u8] = b"$14\r\nredlock-marker\r\n";
    if !cmd.windows(BULK.len()).any(|w| w == BULK) {
        return std::borrow::Cow::Borrowed(cmd);
    }
    let marker = slot_marker(slot);
    let mut with = format!("${}\r\n", marker.len()).into_bytes();
    with.extend_from_slice(&marker);
    with.extend_from_slice(b"\r\n");
    let mut out = Vec::with_capacity(cmd.len() + with.len());
    let mut rest = cmd;
    while let Some(at) = rest.windows(BULK.len()).position(|w| w == BULK) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(&with);
        rest = &rest[at + BULK.len()..];
    }
    out.extend_from_slice(rest);
    std::borrow::Cow::Owned(out)
}

/// Checks a fair acquisition's drop-out time: [`MIN_DROP_OUT`] to [`MAX_DROP_OUT`].
pub(crate) fn check_drop_out(d: Duration) -> Result<(), Error> {
    if !(MIN_DROP_OUT..=MAX_DROP_OUT).contains(&d) {
        return Err(Error::invalid(format!(
            "a fair waiter's drop-out time is {} ms to {} ms, not {} ms",
            MIN_DROP_OUT.as_millis(),
            MAX_DROP_OUT.as_millis(),
            d.as_millis()
        )));
    }
    Ok(())
}

/// Checks a semaphore's permit count: 1 to [`MAX_PERMITS`].
pub(crate) fn check_permits(permits: u32) -> Result<(), Error> {
    if permits == 0 || permits > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "a semaphore has 1 to {MAX_PERMITS} permits, not {permits}"
        )));
    }
    Ok(())
}

/// Checks a reentrant lock's owner id: 1 to [`MAX_OWNER_LEN`] bytes.
pub(crate) fn check_owner(owner: &[u8]) -> Result<(), Error> {
    if owner.is_empty() {
        return Err(Error::invalid("owner id must not be empty"));
    }
    if owner.len() > MAX_OWNER_LEN {
        return Err(Error::invalid(format!(
            "owner id is {} bytes; the limit is {MAX_OWNER_LEN}",
            owner.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shard_checks_the_marker_of_its_slot() {
        let mut cmd = Vec::new();
        crate::resp::pack(&[b"SET", b"k", b"redlock-marker-x", b"NX"], &mut cmd);
        crate::resp::pack(&[b"EXISTS", super::MARKER_KEY], &mut cmd);
        crate::resp::pack(
            &[b"EVALSHA", b"sha", b"2", b"k", super::MARKER_KEY],
            &mut cmd,
        );
        let slot = crate::slot::key_slot(b"k");
        let out = super::with_slot_marker(&cmd, slot);
        let parts = crate::resp::split_commands(&out).unwrap();
        let marker = super::slot_marker(slot);
        assert_eq!(crate::slot::key_slot(&marker), slot);
        let mut want = Vec::new();
        crate::resp::pack(&[b"SET", b"k", b"redlock-marker-x", b"NX"], &mut want);
        assert_eq!(parts[0], &want[..]);
        want.clear();
        crate::resp::pack(&[b"EXISTS", &marker], &mut want);
        assert_eq!(parts[1], &want[..]);
        want.clear();
        crate::resp::pack(&[b"EVALSHA", b"sha", b"2", b"k", &marker], &mut want);
        assert_eq!(parts[2], &want[..]);
        let plain = b"*1\r\n$4\r\nPING\r\n";
        assert!(matches!(
            super::with_slot_marker(plain, 0),
            std::borrow::Cow::Borrowed(_)
        ));
        assert!(super::own_key(&marker));
    }

    use super::*;

    #[test]
    fn durations_past_the_longest_ttl_are_refused_by_name() {
        let base = || Config::new(["redis://127.0.0.1:1"]);
        let huge = Duration::MAX;
        let cases: [(&str, Config); 9] = [
            ("retry delay", base().retry_delay(huge)),
            ("connect timeout", base().connect_timeout(huge)),
            ("node timeout", base().node_timeout(huge)),
            ("node timeout floor", base().node_timeout_floor(huge)),
            ("node timeout cap", base().node_timeout_cap(huge)),
            ("stale limit", base().stale_limit(huge)),
            (
                "minimum reconnect backoff",
                base().reconnect_backoff(huge, huge),
            ),
            (
                "maximum reconnect backoff",
                base().reconnect_backoff(Duration::from_millis(1), huge),
            ),
            (
                "replica acknowledgement timeout",
                base().replica_acks(1, huge),
            ),
        ];
        for (what, c) in cases {
            match c.validate() {
                Err(Error::InvalidInput(m)) => assert!(m.starts_with(what), "{what}: {m}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        // The longest allowed is accepted.
        assert!(base().connect_timeout(MAX_TTL).validate().is_ok());
    }

    #[test]
    fn defaults_are_documented_values() {
        let c = Config::default();
        assert_eq!(c.retry_count, 3);
        assert_eq!(c.retry_delay, Duration::from_millis(200));
        assert_eq!(c.drift_factor, 0.01);
        assert_eq!(
            c.node_timeout_for(Duration::from_secs(10)),
            Duration::from_secs(1)
        );
        assert_eq!(
            c.node_timeout_for(Duration::from_secs(1)),
            Duration::from_millis(100)
        );
        assert_eq!(
            c.node_timeout_for(Duration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(
            c.node_timeout_for(Duration::from_millis(50)),
            Duration::from_millis(10)
        );
        let c = c.node_timeout(Duration::from_millis(7));
        assert_eq!(
            c.node_timeout_for(Duration::from_secs(10)),
            Duration::from_millis(7)
        );
    }

    #[test]
    fn validation() {
        assert!(Config::new(Vec::<String>::new()).validate().is_err());
        assert!(Config::new(["127.0.0.1:1"]).validate().is_ok());
        let dup = Config::new(["127.0.0.1:1", "redis://127.0.0.1:1/3"]).validate();
        assert!(matches!(dup, Err(Error::InvalidInput(m)) if m.contains("listed twice")));
        for f in [-0.1, 1.0, f64::NAN, f64::INFINITY] {
            assert!(
                Config::new(["127.0.0.1:1"])
                    .drift_factor(f)
                    .validate()
                    .is_err()
            );
        }
        assert!(
            Config::new(["127.0.0.1:1"])
                .connect_timeout(Duration::ZERO)
                .validate()
                .is_err()
        );
        assert!(
            Config::new(["127.0.0.1:1"])
                .node_timeout(Duration::ZERO)
                .validate()
                .is_err()
        );
        for f in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            let r = Config::new(["127.0.0.1:1"])
                .node_timeout_fraction(f)
                .validate();
            assert!(
                matches!(r, Err(Error::InvalidInput(m)) if m.contains("fraction")),
                "{f}"
            );
        }
        assert!(
            Config::new(["127.0.0.1:1"])
                .node_timeout_fraction(1.0)
                .validate()
                .is_ok()
        );
        let bad = Config::new(["127.0.0.1:1", "redis://x:pw@127.0.0.1:99999"]).validate();
        assert!(matches!(bad, Err(Error::InvalidInput(m)) if m.starts_with("node 1")));
    }

    #[test]
    fn database_numbers_beyond_what_redis_accepts_are_rejected_at_once() {
        // SELECT parses its index as a C int: a larger one would fail at every connect.
        let a = NodeAddr::parse("redis://127.0.0.1:7001/2147483647").unwrap();
        assert_eq!(a.db(), i64::from(i32::MAX));
        for url in [
            "redis://127.0.0.1:7001/2147483648",
            "redis://127.0.0.1:7001/99999999999",
            "redis://:pw@127.0.0.1:7001/99999999999",
        ] {
            let e = NodeAddr::parse(url).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidInput(m) if m.contains("out of range")),
                "{url}: {e}"
            );
        }
        let e = Config::new(["127.0.0.1:1", "redis://127.0.0.1:2/99999999999"])
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("node 1"), "{e}");
    }

    #[test]
    fn display_redacts_passwords() {
        let a = NodeAddr::parse("redis://alice:topsecret@127.0.0.1:7001/2").unwrap();
        assert_eq!(a.to_string(), "alice:***@127.0.0.1:7001/2");
        assert!(!format!("{a:?}").contains("topsecret"));
        let a = NodeAddr::parse("redis://:topsecret@127.0.0.1:7001").unwrap();
        assert_eq!(a.to_string(), ":***@127.0.0.1:7001");
    }

    #[test]
    fn resource_rules() {
        assert!(check_resource(b"").is_err());
        assert!(check_resource(b"\0\r\n\xff").is_ok());
        assert!(check_resource(&[b'a'; MAX_RESOURCE_LEN]).is_ok());
        assert!(check_resource(&[b'a'; MAX_RESOURCE_LEN + 1]).is_err());
        assert!(check_owner(b"").is_err());
        assert!(check_owner(b"host:1\0\xff").is_ok());
        assert!(check_owner(&[b'a'; MAX_OWNER_LEN]).is_ok());
        assert!(check_owner(&[b'a'; MAX_OWNER_LEN + 1]).is_err());
    }
}
