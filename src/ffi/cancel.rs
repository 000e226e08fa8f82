//! Cancellation: `redlock_cancel`, a handle that stops acquisitions from another thread.

use super::acquire::{redlock_acquire_opts, with_opts};
use super::{guard_or, handle, live, live_or_none, redlock_status, release, take};
use crate::Cancel;

/// A cancellation handle: `redlock_cancel_fire` stops every acquisition whose options carry it
/// (`redlock_acquire_opts_set_cancel`), now and later. Such an acquisition returns
/// `REDLOCK_STATUS_CANCELLED` within one round trip (at once while it waits) and leaves no key
/// behind. Thread-safe: fire it from any thread, any number of times (not from a signal
/// handler: it takes a lock).
///
/// Methods: `redlock_cancel_new`, `redlock_cancel_fire`, `redlock_cancel_is_fired`,
/// `redlock_cancel_free`.
pub struct redlock_cancel {
    /// `Handle::MAGIC` while live (see `super::Handle`).
    magic: u64,
    inner: Cancel,
}

handle!(redlock_cancel, b"RLKCANCL");

/// Creates a handle that has not fired. Free it with `redlock_cancel_free`. Returns NULL only
/// if memory is exhausted.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_cancel_new() -> *mut redlock_cancel {
    guard_or(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(redlock_cancel {
            magic: <redlock_cancel as super::Handle>::MAGIC,
            inner: Cancel::new(),
        }))
    })
}

/// Fires the handle: every acquisition using it stops, waking at once if it waits. Thread-safe
/// and idempotent; a fired handle stays fired. NULL is a no-op, and so is an invalid handle
/// (best effort: see `REDLOCK_STATUS_INVALID_HANDLE`).
///
/// # Safety
/// `c` must be NULL or a live handle (it may be used by other threads meanwhile).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_fire(c: *const redlock_cancel) {
    guard_or((), || {
        // SAFETY: NULL or live, per the contract (checked, best effort); only shared access.
        if let Some(c) = unsafe { live_or_none(c) } {
            c.inner.fire();
        }
    });
}

/// Whether the handle has fired. False for NULL or an invalid handle.
///
/// # Safety
/// `c` must be NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_is_fired(c: *const redlock_cancel) -> bool {
    guard_or(false, || {
        // SAFETY: NULL or live, per the contract (checked, best effort); only shared access.
        unsafe { live_or_none(c) }.is_some_and(|c| c.inner.is_fired())
    })
}

/// Frees the handle. Options that carry it keep their own reference, so freeing it while they
/// live is safe (they can no longer be fired through it). NULL is a no-op, and so is a handle
/// found freed already (best effort: see `REDLOCK_STATUS_INVALID_HANDLE`).
///
/// # Safety
/// `c` must be NULL or a pointer from `redlock_cancel_new` not yet freed, which no other
/// thread uses meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_cancel_free(c: *mut redlock_cancel) {
    guard_or((), || {
        // SAFETY: from Box::into_raw in redlock_cancel_new, freed at most once per the
        // contract; a second free is detected (best effort) by `take`.
        if let Some(b) = unsafe { take(c) } {
            release(b);
        }
    });
}

/// Makes acquisitions with these options cancellable through `c` (NULL: not cancellable, the
/// default). An acquisition that is cancelled returns `REDLOCK_STATUS_CANCELLED`; one started
/// with a handle that has already fired returns it without contacting any node.
///
/// Statuses: OK, NULL_ARGUMENT (`opts`), INVALID_HANDLE (`opts`, or `c` when not NULL; the
/// options are unchanged).
///
/// # Safety
/// `opts` must be live options; `c` NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_cancel(
    opts: *mut redlock_acquire_opts,
    c: *mut redlock_cancel,
) -> redlock_status {
    let f = |o: crate::LockOptions| {
        if c.is_null() {
            return Ok(o.no_cancel());
        }
        // SAFETY: live, per the contract (checked, best effort); only shared access.
        let c = unsafe { live(c, "c") }?;
        Ok(o.cancel(c.inner.clone()))
    };
    // SAFETY: per the contract.
    unsafe { with_opts(opts, f) }
}
