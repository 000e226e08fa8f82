//! `redlock_holders`: who holds a resource, as one snapshot (`Redlock::holders`).

use std::ffi::c_char;

use super::{
    FfiError, bytes, guard, guard_or, handle, live_or_none, manager_ref, redlock_manager,
    redlock_status, release, take, write_str,
};
use crate::{Holder, HolderKind, Holders, NodeHold};

/// A snapshot of who holds one resource on each node, from `redlock_holders_get`.
///
/// Read with `redlock_holders_is_locked`, `redlock_holders_node_count`,
/// `redlock_holders_info`, `redlock_holders_label` and `redlock_holders_id`; free with
/// `redlock_holders_free`. Immutable: any number of threads may read one at once.
///
/// A snapshot for people and monitoring, never a reason to act: the holder can change as soon
/// as it is read (take the lock to act safely).
pub struct redlock_holders {
    /// `Handle::MAGIC` while live (see `super::Handle`).
    magic: u64,
    inner: Holders,
    /// The holder a quorum agrees on, computed once.
    quorum_holder: Option<Holder>,
}

handle!(redlock_holders, b"RLKHOLDR");

/// The `index` of `redlock_holders_info`, `redlock_holders_label` and `redlock_holders_id`
/// that names the holder a quorum of nodes agrees on, rather than one node.
pub const REDLOCK_HOLDERS_QUORUM: usize = !0;

/// What one node has under the resource's key. Stable numbers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_hold_state {
    /// No key: free on this node (for `REDLOCK_HOLDERS_QUORUM`: no holder on a quorum).
    REDLOCK_HOLD_FREE = 0,
    /// A key is there.
    REDLOCK_HOLD_HELD = 1,
    /// The node could not be asked (down, timed out, an error).
    REDLOCK_HOLD_FAILED = 2,
}

/// What kind of key holds the resource. Stable numbers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_holder_kind {
    /// Not held (the state is FREE or FAILED).
    REDLOCK_HOLDER_NONE = 0,
    /// A plain lock of this library: its id is the lock's value, its label the holder's label.
    REDLOCK_HOLDER_LOCK = 1,
    /// A reentrant lock of this library: its id and label are the owner id.
    REDLOCK_HOLDER_REENTRANT = 2,
    /// Another key: another library's lock (redsync's, node-redlock's), a value in an older
    /// format, or a key that is not a lock. Its id is the value if it is a string.
    REDLOCK_HOLDER_OTHER = 3,
    /// Shared (read) locks: one hash of every shared holder's hold; empty id, no label.
    REDLOCK_HOLDER_SHARED = 4,
}

/// One node's answer, or the quorum's holder (see `redlock_holders_info`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct redlock_holder_info {
    /// Free, held or failed.
    pub state: redlock_hold_state,
    /// What kind of key; NONE unless held.
    pub kind: redlock_holder_kind,
    /// The remaining TTL in milliseconds (for the quorum's holder: how long it stays on a
    /// quorum unless renewed); -1 when not held or when the key has no expiry.
    pub ttl_ms: i64,
    /// How long it has been held, in milliseconds (see `Holder::held_for` in the Rust docs: a
    /// plain lock's is read against the holder's wall clock); -1 when unknown or not held.
    pub held_for_ms: i64,
}

fn ms(d: Option<std::time::Duration>) -> i64 {
    d.map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn info(state: redlock_hold_state, h: Option<&Holder>) -> redlock_holder_info {
    let kind = match h.map(|h| h.kind) {
        None => redlock_holder_kind::REDLOCK_HOLDER_NONE,
        Some(HolderKind::Lock) => redlock_holder_kind::REDLOCK_HOLDER_LOCK,
        Some(HolderKind::Reentrant) => redlock_holder_kind::REDLOCK_HOLDER_REENTRANT,
        Some(HolderKind::Shared) => redlock_holder_kind::REDLOCK_HOLDER_SHARED,
        Some(_) => redlock_holder_kind::REDLOCK_HOLDER_OTHER,
    };
    redlock_holder_info {
        state,
        kind,
        ttl_ms: ms(h.and_then(|h| h.ttl)),
        held_for_ms: ms(h.and_then(|h| h.held_for)),
    }
}

impl redlock_holders {
    /// Node `index`'s holder, or the quorum's for `REDLOCK_HOLDERS_QUORUM`; `Err` for an
    /// index out of range.
    fn entry(&self, index: usize) -> Result<(redlock_hold_state, Option<&Holder>), FfiError> {
        use redlock_hold_state::*;
        if index == REDLOCK_HOLDERS_QUORUM {
            return Ok(match &self.quorum_holder {
                Some(h) => (REDLOCK_HOLD_HELD, Some(h)),
                None => (REDLOCK_HOLD_FREE, None),
            });
        }
        match self.inner.nodes.get(index) {
            Some(NodeHold::Held(h)) => Ok((REDLOCK_HOLD_HELD, Some(h))),
            Some(NodeHold::Free) => Ok((REDLOCK_HOLD_FREE, None)),
            Some(_) => Ok((REDLOCK_HOLD_FAILED, None)),
            None => Err(FfiError::invalid(format!(
                "node index {index} is out of range: there are {} nodes",
                self.inner.nodes.len()
            ))),
        }
    }
}

/// Asks every node who holds `resource` (`resource_len` bytes) and stores the answers in a new
/// snapshot at `*out`, to be freed with `redlock_holders_free`. Waits for every node, each for
/// at most its node timeout. Nodes that fail are reported as `REDLOCK_HOLD_FAILED`, not as an
/// error of the call.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE, INVALID_ARGUMENT (a resource name that an
/// acquisition would refuse), INTERNAL, PANIC.
///
/// # Safety
/// `mgr` must be a live manager; `resource` `resource_len` readable bytes; `out` writable;
/// `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_holders_get(
    mgr: *const redlock_manager,
    resource: *const u8,
    resource_len: usize,
    out: *mut *mut redlock_holders,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let run = || {
        // SAFETY: per this function's contract (checked, best effort).
        let m = unsafe { manager_ref(mgr) }?;
        // SAFETY: `resource_len` readable bytes per the contract.
        let r = unsafe { bytes(resource, resource_len, "resource") }?;
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        let inner = m.holders(r)?;
        let quorum_holder = inner.holder();
        let h = Box::new(redlock_holders {
            magic: <redlock_holders as super::Handle>::MAGIC,
            inner,
            quorum_holder,
        });
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { *out = Box::into_raw(h) };
        Ok(())
    };
    // SAFETY: `err` per this function's contract.
    unsafe { guard(err, err_len, run) }
}

/// Whether one holder is on a quorum of nodes: the resource was locked when it was read.
/// False for NULL or an invalid handle.
///
/// # Safety
/// `h` must be NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_holders_is_locked(h: *const redlock_holders) -> bool {
    // SAFETY: NULL or live per the contract (checked, best effort).
    guard_or(false, || {
        unsafe { live_or_none(h) }.is_some_and(|h| h.quorum_holder.is_some())
    })
}

/// How many nodes the snapshot has answers for (the manager's node count); 0 for NULL or an
/// invalid handle.
///
/// # Safety
/// `h` must be NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_holders_node_count(h: *const redlock_holders) -> usize {
    // SAFETY: NULL or live per the contract (checked, best effort).
    guard_or(0, || {
        unsafe { live_or_none(h) }.map_or(0, |h| h.inner.nodes.len())
    })
}

/// Writes node `index`'s answer (or, for `REDLOCK_HOLDERS_QUORUM`, the holder a quorum agrees
/// on: state FREE when there is none) to `*out`.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE, INVALID_ARGUMENT (index out of range).
///
/// # Safety
/// `h` must be a live snapshot; `out` writable; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_holders_info(
    h: *const redlock_holders,
    index: usize,
    out: *mut redlock_holder_info,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let run = || {
        // SAFETY: per this function's contract (checked, best effort).
        let h = unsafe { super::live(h, "h") }?;
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        let (state, holder) = h.entry(index)?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { *out = info(state, holder) };
        Ok(())
    };
    // SAFETY: `err` per this function's contract.
    unsafe { guard(err, err_len, run) }
}

/// Copies the label of node `index`'s holder (or the quorum's, for `REDLOCK_HOLDERS_QUORUM`)
/// into `buf` like `snprintf`: at most `len - 1` bytes and a NUL (nothing when `buf` is NULL
/// or `len` is 0), and returns the label's whole length. Returns 0 when there is no label
/// (not held, another kind of key, a lock taken without one), for an index out of range, and
/// for NULL or an invalid handle.
///
/// # Safety
/// `h` must be NULL or a live snapshot; `buf` NULL or `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_holders_label(
    h: *const redlock_holders,
    index: usize,
    buf: *mut c_char,
    len: usize,
) -> usize {
    guard_or(0, || {
        // SAFETY: NULL or live per the contract (checked, best effort).
        let Some(h) = (unsafe { live_or_none(h) }) else {
            return 0;
        };
        let Ok((_, Some(holder))) = h.entry(index) else {
            return 0;
        };
        let Some(label) = &holder.label else {
            return 0;
        };
        // SAFETY: `buf` NULL or `len` writable bytes per the contract.
        unsafe { write_str(buf, len, label) };
        label.len()
    })
}

/// Copies the identity of node `index`'s holder (or the quorum's, for
/// `REDLOCK_HOLDERS_QUORUM`) into `buf`: `min(len, n)` bytes, not NUL-terminated, and returns
/// `n`, the identity's whole length. The identity is a plain lock's value (equal to
/// `redlock_lease_value` of the lease that holds it), a reentrant lock's owner id, another
/// string's value. Returns 0 when not held, for an index out of range, and for NULL or an
/// invalid handle.
///
/// # Safety
/// `h` must be NULL or a live snapshot; `buf` NULL or `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_holders_id(
    h: *const redlock_holders,
    index: usize,
    buf: *mut u8,
    len: usize,
) -> usize {
    guard_or(0, || {
        // SAFETY: NULL or live per the contract (checked, best effort).
        let Some(h) = (unsafe { live_or_none(h) }) else {
            return 0;
        };
        let Ok((_, Some(holder))) = h.entry(index) else {
            return 0;
        };
        if !buf.is_null() {
            let n = holder.id.len().min(len);
            // SAFETY: `buf` has `len` >= n writable bytes per the contract; the source is
            // our own vector, which cannot overlap the caller's buffer.
            unsafe { std::ptr::copy_nonoverlapping(holder.id.as_ptr(), buf, n) };
        }
        holder.id.len()
    })
}

/// Frees a snapshot. NULL is a no-op, and so is a handle found freed already (best effort).
///
/// # Safety
/// `h` must be NULL or a snapshot not yet freed, with no other call on it in progress.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_holders_free(h: *mut redlock_holders) {
    guard_or((), || {
        // SAFETY: from Box::into_raw in redlock_holders_get, freed at most once per the
        // contract; a second free is detected (best effort) by `take`.
        if let Some(b) = unsafe { take(h) } {
            release(b);
        }
    });
}
