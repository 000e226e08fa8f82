//! Leader election: `redlock_campaign`, `redlock_lease_proclaim`, `redlock_leader_get`,
//! `redlock_leader_wait_change` and the `redlock_leader` snapshot they hand out
//! (`Redlock::election`). The leadership is a `redlock_lease`: `redlock_unlock` resigns, its
//! fencing token is the term, and the lost-lease calls tell of a lost leadership.

use std::ffi::c_char;
use std::time::Duration;

use super::acquire::{hand_out, opts_or};
use super::lease::with_lease;
use super::{
    FfiError, bytes, guard, guard_or, handle, live_or_none, manager_ref, redlock_acquire_opts,
    redlock_lease, redlock_manager, redlock_status, release, take,
};
use crate::{Leader, Leadership, LockOptions};

/// An election's leader as a quorum held it when it was read, from `redlock_leader_get` or
/// `redlock_leader_wait_change`. Read with `redlock_leader_term`, `redlock_leader_value` and
/// `redlock_leader_validity_ms`; free with `redlock_leader_free`. Immutable: any number of
/// threads may read one at once.
pub struct redlock_leader {
    /// `Handle::MAGIC` while live (see `super::Handle`).
    magic: u64,
    inner: Leader,
}

handle!(redlock_leader, b"RLKLEADR");

/// Campaigns in the election `election` with `value` (at most `REDLOCK_MAX_LEADER_VALUE`
/// bytes; an address, say) until this caller leads, and hands out the leadership as a lease of
/// `ttl_ms`, renewed automatically (options set with `redlock_acquire_opts_set_auto_renew`
/// replace the default renewal, which lasts as long as the lease). The lease's fencing token
/// is the term, greater than every earlier leader's; `redlock_unlock` resigns (waiting
/// candidates are woken by it); `redlock_lease_is_lost`, `redlock_lease_wait_lost` and the
/// lost callback tell of a lost leadership a margin before its validity ends (TTL/20, at
/// least 2 ms, at most 250 ms).
///
/// Waiting: as `redlock_acquire`, except that options with no wait set (NULL options, or
/// `redlock_acquire_opts_set_retries` never called) wait until this caller leads; a wait of 0
/// ms tries once; the options' cancel handle ends the wait.
///
/// Statuses: OK (`*out` receives a lease to free with `redlock_lease_free`), NOT_ACQUIRED
/// (another leads and the wait is over), UNAVAILABLE, AUTH, CANCELLED, INVALID_ARGUMENT
/// (name, TTL, value, or options with an owner, shared or fair set; nothing sent),
/// NULL_ARGUMENT, INVALID_HANDLE, INTERNAL.
///
/// # Safety
/// `mgr` must be a live manager; `election` `election_len` readable bytes and `value`
/// `value_len` (each NULL when its length is 0); `opts` NULL or live options; `out` writable;
/// `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // the contract's signature
pub unsafe extern "C" fn redlock_campaign(
    mgr: *mut redlock_manager,
    election: *const u8,
    election_len: usize,
    value: *const u8,
    value_len: usize,
    ttl_ms: u32,
    opts: *const redlock_acquire_opts,
    out: *mut *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let m = unsafe { manager_ref(mgr) }?;
        let defaults = LockOptions::new();
        // SAFETY: NULL or live options per the contract.
        let opts = unsafe { opts_or(opts, &defaults) }?;
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        // SAFETY: `election_len` readable bytes at `election`, per the contract.
        let name = unsafe { bytes(election, election_len, "election") }?;
        // SAFETY: `value_len` readable bytes at `value`, per the contract.
        let value = unsafe { bytes(value, value_len, "value") }?;
        let ttl = Duration::from_millis(ttl_ms.into());
        let leadership = m.election(name).campaign(value, ttl, opts)?;
        // SAFETY: `out` is non-NULL (checked above) and writable per the contract.
        unsafe { hand_out(leadership.into_lease(), out) }
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// Changes the value of the leadership `lease` (from `redlock_campaign`), keeping its term:
/// done when a quorum confirmed it while the leadership was valid; observers are woken.
///
/// Statuses: OK, NOT_HELD (lost, resigned, or not confirmed in time), UNAVAILABLE, AUTH,
/// INVALID_ARGUMENT (a lease that is not a leadership, or a value over
/// `REDLOCK_MAX_LEADER_VALUE` bytes), NULL_ARGUMENT, INVALID_HANDLE, INTERNAL.
///
/// # Safety
/// `lease` must be a live lease; `value` `value_len` readable bytes (NULL when 0); `err` NULL
/// or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_proclaim(
    lease: *mut redlock_lease,
    value: *const u8,
    value_len: usize,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |l: &redlock_lease| {
        // SAFETY: `value_len` readable bytes at `value`, per the contract.
        let v = unsafe { bytes(value, value_len, "value") }?;
        Ok(Leadership::proclaim_on(&l.inner, v)?)
    };
    // SAFETY: per the contract.
    unsafe { with_lease(lease, err, err_len, f) }
}

/// Hands out `leader` in `*out`, or says there is none with `status` (and `*out` NULL).
///
/// # Safety
/// `out` must be non-NULL and writable.
unsafe fn leader_out(
    leader: Option<Leader>,
    out: *mut *mut redlock_leader,
    status: redlock_status,
    none: &str,
) -> Result<(), FfiError> {
    let raw = match leader {
        Some(inner) => Box::into_raw(Box::new(redlock_leader {
            magic: <redlock_leader as super::Handle>::MAGIC,
            inner,
        })),
        None => std::ptr::null_mut(),
    };
    // SAFETY: non-NULL and writable per this function's contract.
    unsafe { *out = raw };
    if raw.is_null() {
        return Err(FfiError::with_status(status, none));
    }
    Ok(())
}

/// Reads the current leader of `election` from every node.
///
/// Statuses: OK (`*out` receives a snapshot to free with `redlock_leader_free`), NOT_HELD (no
/// leader is held by a quorum: nobody elected, the last leadership over, or a campaign under
/// way; `*out` is set to NULL), UNAVAILABLE (fewer than a quorum answered), INVALID_ARGUMENT,
/// NULL_ARGUMENT, INVALID_HANDLE, INTERNAL.
///
/// # Safety
/// `mgr` must be a live manager; `election` `election_len` readable bytes; `out` writable;
/// `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_get(
    mgr: *mut redlock_manager,
    election: *const u8,
    election_len: usize,
    out: *mut *mut redlock_leader,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let m = unsafe { manager_ref(mgr) }?;
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        // SAFETY: `election_len` readable bytes at `election`, per the contract.
        let name = unsafe { bytes(election, election_len, "election") }?;
        let leader = m.election(name).leader()?;
        let none = "no leader: none is held by a quorum of nodes";
        // SAFETY: `out` is non-NULL (checked above) and writable per the contract.
        unsafe { leader_out(leader, out, redlock_status::REDLOCK_STATUS_NOT_HELD, none) }
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// Waits up to `timeout_ms` for a leader of `election` whose term is above `after_term` (0:
/// any leader), woken by the nodes' announcement of each new term, not by polling. A leader
/// elected meanwhile is returned as the latest, whatever terms were missed: pass the term
/// returned to the next call to see every change in order.
///
/// Statuses: OK (`*out` receives a snapshot to free with `redlock_leader_free`), NOT_ACQUIRED
/// (the timeout came first; `*out` is set to NULL), UNAVAILABLE (the nodes could not be read
/// when the timeout came), INVALID_ARGUMENT, NULL_ARGUMENT, INVALID_HANDLE, INTERNAL.
///
/// # Safety
/// `mgr` must be a live manager; `election` `election_len` readable bytes; `out` writable;
/// `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // the contract's signature
pub unsafe extern "C" fn redlock_leader_wait_change(
    mgr: *mut redlock_manager,
    election: *const u8,
    election_len: usize,
    after_term: u64,
    timeout_ms: u32,
    out: *mut *mut redlock_leader,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let m = unsafe { manager_ref(mgr) }?;
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        // SAFETY: `election_len` readable bytes at `election`, per the contract.
        let name = unsafe { bytes(election, election_len, "election") }?;
        let timeout = Duration::from_millis(timeout_ms.into());
        let leader = m.election(name).wait_change(after_term, timeout, None)?;
        let none = format!("no leader above term {after_term} within {timeout_ms} ms");
        let status = redlock_status::REDLOCK_STATUS_NOT_ACQUIRED;
        // SAFETY: `out` is non-NULL (checked above) and writable per the contract.
        unsafe { leader_out(leader, out, status, &none) }
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// The leader's term; 0 for NULL or an invalid handle.
///
/// # Safety
/// `leader` must be NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_term(leader: *const redlock_leader) -> u64 {
    // SAFETY: NULL or live per the contract (checked, best effort).
    guard_or(0, || {
        unsafe { live_or_none(leader) }.map_or(0, |l| l.inner.term)
    })
}

/// The leader's value: a pointer to its bytes (valid until `redlock_leader_free`; not
/// NUL-terminated) with its length in `*len` (when `len` is not NULL); NULL (and 0) for NULL
/// or an invalid handle.
///
/// # Safety
/// `leader` must be NULL or a live snapshot; `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_value(
    leader: *const redlock_leader,
    len: *mut usize,
) -> *const u8 {
    guard_or(std::ptr::null(), || {
        // SAFETY: NULL or live per the contract (checked, best effort).
        let l = unsafe { live_or_none(leader) };
        let (p, n) = l.map_or((std::ptr::null(), 0), |l| {
            (l.inner.value.as_ptr(), l.inner.value.len())
        });
        if !len.is_null() {
            // SAFETY: non-NULL and writable per the contract.
            unsafe { *len = n };
        }
        p
    })
}

/// How long the leadership stayed valid at least, in milliseconds, as the nodes' TTLs said
/// when it was read (saturating); 0 for NULL or an invalid handle.
///
/// # Safety
/// `leader` must be NULL or a live snapshot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_validity_ms(leader: *const redlock_leader) -> u32 {
    guard_or(0, || {
        // SAFETY: NULL or live per the contract (checked, best effort).
        unsafe { live_or_none(leader) }.map_or(0, |l| {
            u32::try_from(l.inner.validity.as_millis()).unwrap_or(u32::MAX)
        })
    })
}

/// Frees a leader snapshot. NULL is a no-op, and so is a handle found freed already (best
/// effort).
///
/// # Safety
/// `leader` must be NULL or a snapshot not yet freed, with no other call on it in progress.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_leader_free(leader: *mut redlock_leader) {
    guard_or((), || {
        // SAFETY: from Box::into_raw in `leader_out`, freed at most once per the contract; a
        // second free is detected (best effort) by `take`.
        if let Some(b) = unsafe { take(leader) } {
            release(b);
        }
    });
}
