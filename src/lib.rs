//! # redlock — the Redlock distributed lock over independent Redis masters
//!
//! A lock that holds as long as a majority of N independent Redis masters is up: one round
//! trip per step (every command is written to all nodes at once and the step returns as soon
//! as a quorum has decided), a minority of dead, slow or hostile nodes tolerated, and no lock
//! ever reported as held when it is not.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock::{Config, Redlock, Error};
//!
//! let mgr = Redlock::new(Config::new([
//!     "redis://127.0.0.1:7001",
//!     "redis://127.0.0.1:7002",
//!     "redis://127.0.0.1:7003",
//! ]))?;
//! let lease = mgr.lock("orders:42", Duration::from_secs(10))?;   // retries 3 times by default
//! assert!(lease.validity() > Duration::from_secs(9));
//! // ... critical section: finish within lease.validity() ...
//! lease.extend(Duration::from_secs(10))?;
//! lease.unlock()?;
//!
//! // Or unlock on drop:
//! let _guard = mgr.try_lock("orders:43", Duration::from_secs(5))?.into_guard();
//! # Ok::<(), Error>(())
//! ```
//!
//! ## The algorithm
//!
//! * **Acquire**: `SET redlock:<resource> <token> NX PX <ttl>` on every node at once, with a
//!   random 20-byte token, pipelined in the same write with `PTTL` of the key (where it
//!   refuses: the holder's remaining TTL) and `EXISTS` of the restart-quarantine marker; no
//!   script. The lock is granted when `N/2 + 1` nodes granted it and the
//!   remaining validity, `TTL − elapsed − (TTL × drift_factor + 2 ms)`, measured on a monotonic
//!   clock, is positive. Otherwise the key is released on every node at once.
//! * **Release**: a Lua script deletes the key only where it still holds our token, and
//!   announces the release (`PUBLISH` on the key's name) to the waiters.
//! * **Extend**: a Lua script sets a new TTL only where the key still holds our token; the
//!   extension counts only when a quorum confirms it before the current validity ends.
//! * **Waiting**: with [`Wait::Retries`], random pauses of up to the retry delay, a bounded
//!   number of times. With [`Wait::For`] or [`Wait::Until`], until a node announces a release
//!   (or the holder's TTL, learned from the refusals, runs out), over one subscriber
//!   connection per node shared by the manager; see [`LockOptions::notify`]. A [`Cancel`]
//!   handle ends any wait from another thread.
//!
//! ## Keys
//!
//! The key for resource `R` is `redlock:` followed by the bytes of `R`. Resource names are 1 to
//! [`MAX_RESOURCE_LEN`] arbitrary bytes (NUL, CR/LF and invalid UTF-8 are fine); an empty name
//! is rejected as invalid input.
//!
//! ## Guarantees and their limits
//!
//! Mutual exclusion holds while the holder finishes within [`Lease::validity`], clocks on the
//! nodes run at rates within the drift factor of each other, and a node that granted a lock
//! does not restart without its data and then grant it again within the TTL. A process pause
//! longer than the validity (GC, swap, a stopped VM) breaks the first assumption: the holder
//! must check [`Lease::validity`] before acting, and storage that must never see a stale
//! writer needs fencing tokens.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod acquire;
mod config;
mod error;
pub mod ffi;
mod holders;
mod lease;
mod lock;
mod manager;
mod metrics;
mod mux;
mod node;
mod notify;
pub mod park;
mod quorum;
mod renew;
mod resp;
mod scan;
mod script;
pub mod scripts;
pub mod slot;
mod timing;
mod tls;
mod token;
mod ttl;

pub use acquire::{LockOptions, Wait};
pub use config::{
    Config, DEFAULT_DROP_OUT, DEFAULT_MAX_TTL, ELECTION_PREFIX, FAIR_PREFIX, FAIR_TICKETS_PREFIX,
    FENCE_PREFIX, INTENT_PREFIX, KEY_PREFIX, LEADER_PREFIX, LOSS_NOTE_KEY, MARKER_KEY,
    MAX_DROP_OUT, MAX_KEY_PREFIX_LEN, MAX_LABEL_LEN, MAX_OWNER_LEN, MAX_PERMITS, MAX_RESOURCE_LEN,
    MAX_RESOURCES, MAX_TTL, MIN_DROP_OUT, NodeAddr, SEMAPHORE_PREFIX, SENTINEL_PORT,
};
pub use error::{Error, NodeOutcome, NodeReport, Op, QuarantineReason, Report};
pub use holders::{Holder, HolderKind, Holders, NodeHold};
pub use lease::{Lease, LeaseGuard, LostCallback, LostReason, RenewOptions};
pub use lock::{Leader, MAX_LEADER_VALUE};
pub use manager::{Election, Leadership, NodeState, Observer, Redlock, Semaphore};
pub use metrics::{
    BUCKETS, HistogramSnapshot, Metrics, NODE_ERROR_KINDS, NodeMetrics, OutcomeCounts, RenewalStats,
};
pub use notify::Cancel;
pub use quorum::quorum;
pub use scan::{KeyInfo, KeyKind, Scan};
pub use timing::{DRIFT_CONSTANT, WORK_ALLOWANCE};
pub use tls::TlsOptions;
pub use token::TOKEN_BYTES;
