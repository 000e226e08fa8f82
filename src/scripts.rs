//! The Lua scripts run on every node. Each acts only when the key still holds the caller's
//! token, so that a client can never release or extend a lock another client holds.
//!
//! They take the lock key as `KEYS[1]` and the token as `ARGV[1]`, and return 1 when they
//! acted, 0 when the key is absent or holds another token. Every script is sent with
//! `EVALSHA` (loaded once per connection during the handshake), so a node never hashes the
//! script's text per call. A node that answers `NOSCRIPT` (after `SCRIPT FLUSH`, for
//! instance) gets the `EVAL` form once, from whoever reads that reply on the node's
//! connection, even after the caller decided at quorum and returned (see `node::link`). The
//! one case this cannot cover: a process that exits between a release's return and the late
//! `NOSCRIPT` of a node whose script cache was flushed leaves that one key until its TTL, as a
//! release lost on the network would.
//!
//! Each script is defined beside the primitive that sends it (`lock/<kind>.rs`, `scan.rs`,
//! `holders.rs`), with its safety argument; this module is their public catalogue.

pub use crate::holders::HOLDER;
pub use crate::lock::election::{ELECT_WRITE, LEADER_READ, PROCLAIM};
pub use crate::lock::fair::{FAIR_ACQUIRE, FAIR_RELEASE};
pub use crate::lock::multi::{MULTI_ACQUIRE, MULTI_EXTEND, MULTI_RELEASE};
pub use crate::lock::plain::{
    ACQUIRE, DISCARD, EXTEND, FENCE_WRITE, FENCED_ACQUIRE, FENCED_STORE_WRITE, RELEASE, RENEW,
};
pub use crate::lock::reentrant::{
    FENCED_STORE_WRITE_REENTRANT, REENTRANT_ACQUIRE, REENTRANT_EXTEND, REENTRANT_FENCE_WRITE,
    REENTRANT_RELEASE, REENTRANT_RENEW,
};
pub use crate::lock::semaphore::SEMAPHORE_ACQUIRE;
pub use crate::lock::shared::{INTENT_DROP, INTENT_QUEUE, SHARED_ACQUIRE};
pub use crate::scan::SCAN_KEYS;

/// All scripts, in the order the handshake loads them.
pub(crate) const ALL: [&str; 23] = [
    RELEASE,
    DISCARD,
    EXTEND,
    RENEW,
    FENCED_ACQUIRE,
    FENCE_WRITE,
    REENTRANT_ACQUIRE,
    REENTRANT_RELEASE,
    REENTRANT_EXTEND,
    REENTRANT_RENEW,
    REENTRANT_FENCE_WRITE,
    SHARED_ACQUIRE,
    INTENT_QUEUE,
    INTENT_DROP,
    MULTI_ACQUIRE,
    MULTI_RELEASE,
    MULTI_EXTEND,
    SEMAPHORE_ACQUIRE,
    FAIR_ACQUIRE,
    FAIR_RELEASE,
    ELECT_WRITE,
    PROCLAIM,
    LEADER_READ,
];
