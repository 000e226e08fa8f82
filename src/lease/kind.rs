//! What a lease holds, as a type. Each primitive's file in `lock/` defines the kind of its
//! leases (`lock::plain::Plain`, `lock::reentrant::Reentrant`, `lock::shared::SharedHold`,
//! `lock::multi::Many`, `lock::semaphore::Permit`, `lock::fair::FairHold`) and implements
//! [`Kind`] for it next to its scripts: how the lease is released, extended, renewed and put
//! back on a node that lost it. The lease and the renewal thread only call these; they never
//! ask which primitive granted a lease.

use crate::quorum::Part;
use crate::resp::{self, Reply};
use crate::script::Script;

use super::LeaseInner;

/// The `EVALSHA` and `EVAL` forms of one script call.
pub(crate) type Calls = (Vec<u8>, Vec<u8>);

/// A command that puts a lease's key back on a node that lost it: the index of the key among
/// the lease's [`keys`](Kind::keys), the command, and its `EVAL` form for a script.
pub(crate) type Restore = (usize, Vec<u8>, Option<Vec<u8>>);

/// How a kind of lease renews: the batch script (leases with the same script renew in one
/// command) and what follows the token and the TTL among each key's arguments.
pub(crate) struct Renewing<'a> {
    pub script: &'static Script,
    pub extra: Option<&'a [u8]>,
}

/// The behaviour of one kind of lease.
pub(crate) trait Kind: Send + Sync + 'static {
    /// The release of lease `l` on every node.
    fn release(&self, l: &LeaseInner) -> Calls;

    /// The extension of lease `l` to `ttl_ms` (decimal milliseconds) from now.
    fn extend(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Calls;

    /// On a manager with a cluster node, the release of lease `l` as one call per slot, when
    /// its keys span several slots (a script touches one); empty when
    /// [`release`](Self::release) serves every node.
    fn release_parts(&self, _l: &LeaseInner) -> Vec<Part> {
        Vec::new()
    }

    /// As [`release_parts`](Self::release_parts), for the extension to `ttl_ms`.
    fn extend_parts(&self, _l: &LeaseInner, _ttl_ms: &[u8]) -> Vec<Part> {
        Vec::new()
    }

    /// How this kind renews in a batch.
    fn renewing(&self) -> Renewing<'_>;

    /// The commands that put lease `l` back, for `ttl_ms`, on a node that lost its keys: by
    /// default `SET key value PX ttl NX` for each key (never over another owner's).
    fn restore(&self, l: &LeaseInner, ttl_ms: &[u8]) -> Vec<Restore> {
        self.keys(l)
            .into_iter()
            .enumerate()
            .map(|(k, key)| {
                let mut cmd = Vec::new();
                let args: [&[u8]; 6] = [b"SET", key, l.token.as_bytes(), b"PX", ttl_ms, b"NX"];
                resp::pack(&args, &mut cmd);
                (k, cmd, None)
            })
            .collect()
    }

    /// Whether a release that a quorum confirmed, with these replies, freed the resource for
    /// others (a reentrant hold frees it only where it was the last hold).
    fn frees(&self, _replies: &[Option<Reply>]) -> bool {
        true
    }

    /// Every lock key of lease `l`: its one key, by default.
    fn keys<'a>(&'a self, l: &'a LeaseInner) -> Vec<&'a [u8]> {
        vec![&l.key]
    }

    /// Every resource of lease `l`, in the caller's order: its one resource, by default.
    fn resources<'a>(&'a self, l: &'a LeaseInner) -> Vec<&'a [u8]> {
        vec![&l.resource]
    }

    /// The work a release or an extension asks of each node, in keys or slots (see
    /// `timing::WORK_ALLOWANCE`).
    fn work(&self) -> usize {
        1
    }

    /// True for a shared hold.
    fn is_shared(&self) -> bool {
        false
    }

    /// A semaphore permit's slot and the semaphore's permit count.
    fn permit(&self) -> Option<(u32, u32)> {
        None
    }

    /// For a fair lock's lease, its ticket (`Some(None)` when granted with nobody queued).
    fn fair_ticket(&self) -> Option<Option<u64>> {
        None
    }

    /// State of the primitive's own that its leases carry, for the primitive to read back
    /// (a leadership's record and value, `lock::election`); `None` for most kinds.
    fn state(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        None
    }
}

/// The calls of script `s` on lease `l`'s keys, with the token, then `extra`, as arguments.
pub(crate) fn owned_calls(s: &Script, keys: &[&[u8]], l: &LeaseInner, extra: &[&[u8]]) -> Calls {
    let mut args: Vec<&[u8]> = Vec::with_capacity(1 + extra.len());
    args.push(l.token.as_bytes());
    args.extend_from_slice(extra);
    s.calls(keys, &args)
}
