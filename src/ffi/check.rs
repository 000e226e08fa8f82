//! Checking an acquisition's input without acquiring: for a binding that must refuse bad
//! input before it starts an acquisition (Python's `alock`), with the library's own rules
//! and messages instead of a copy of them.

use std::ffi::c_char;
use std::time::Duration;

use super::acquire::{names_of, opts_or, redlock_acquire_opts};
use super::{FfiError, bytes, guard, manager_ref, redlock_manager, redlock_status};
use crate::{LockOptions, Redlock};

/// Checks the input of `redlock_acquire` (the resource, `ttl_ms`, and how `opts` combine)
/// exactly as it does, and sends nothing: OK when `redlock_acquire` would go on to contact
/// the nodes, else the INVALID_ARGUMENT it would return, with the same message in `err`. No
/// acquisition is counted in the metrics.
///
/// Statuses: OK, INVALID_ARGUMENT, NULL_ARGUMENT (`mgr`, or `resource` with a non-zero
/// length), INVALID_HANDLE (`mgr`, `opts`), INTERNAL.
///
/// # Safety
/// `mgr` must be a live manager; `resource` must point to `resource_len` readable bytes;
/// `opts` NULL or live options; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_check(
    mgr: *mut redlock_manager,
    resource: *const u8,
    resource_len: usize,
    ttl_ms: u32,
    opts: *const redlock_acquire_opts,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |m: &Redlock, opts: &LockOptions| {
        // SAFETY: `resource` points to `resource_len` readable bytes per the contract.
        let res = unsafe { bytes(resource, resource_len, "resource") }?;
        Ok(m.check_acquire(res, Duration::from_millis(ttl_ms.into()), opts)?)
    };
    // SAFETY: per the contract.
    unsafe { check(mgr, opts, (err, err_len), f) }
}

/// Checks the input of `redlock_acquire_many` exactly as it does, and sends nothing (see
/// `redlock_acquire_check`).
///
/// Statuses: OK, INVALID_ARGUMENT, NULL_ARGUMENT (as `redlock_acquire_many`'s),
/// INVALID_HANDLE, INTERNAL.
///
/// # Safety
/// As for `redlock_acquire_many`, without `out`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_many_check(
    mgr: *mut redlock_manager,
    resources: *const *const u8,
    resource_lens: *const usize,
    count: usize,
    ttl_ms: u32,
    opts: *const redlock_acquire_opts,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |m: &Redlock, opts: &LockOptions| {
        // SAFETY: per the contract.
        let names = unsafe { names_of(resources, resource_lens, count) }?;
        Ok(m.check_acquire_many(&names, Duration::from_millis(ttl_ms.into()), opts)?)
    };
    // SAFETY: per the contract.
    unsafe { check(mgr, opts, (err, err_len), f) }
}

/// Runs check `f` on the manager and options (the defaults for NULL), its outcome a status
/// and a message in `err`.
///
/// # Safety
/// `mgr` NULL or a live manager; `opts` NULL or live options; `err` NULL or `err_len`
/// writable bytes.
unsafe fn check(
    mgr: *mut redlock_manager,
    opts: *const redlock_acquire_opts,
    (err, err_len): (*mut c_char, usize),
    f: impl FnOnce(&Redlock, &LockOptions) -> Result<(), FfiError>,
) -> redlock_status {
    let run = || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let m = unsafe { manager_ref(mgr) }?;
        let defaults = LockOptions::new();
        // SAFETY: NULL or live options per the contract.
        let opts = unsafe { opts_or(opts, &defaults) }?;
        f(m, opts)
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, run) }
}
