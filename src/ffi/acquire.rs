//! Acquisition: the `redlock_acquire_opts` builder and `redlock_acquire`, plus the older entry
//! points (`redlock_lock`, `redlock_try_lock`, `redlock_lock_wait`, `redlock_lock_opts`), which
//! are `redlock_acquire` with fixed options.

use std::ffi::c_char;
use std::time::Duration;

use super::{
    FfiError, bytes, guard, guard_or, handle, live, live_mut, manager_ref, redlock_lease,
    redlock_manager, redlock_status, release, take,
};
use crate::{LockOptions, RenewOptions, Wait};

/// Options of one acquisition: an opaque builder with one setter per option, passed to
/// `redlock_acquire`. `redlock_acquire` only reads them, so one options object may serve
/// any number of calls, from several threads at once, as long as no setter runs meanwhile.
/// Defaults: wait as the manager's retry policy says (`redlock_config_set_retry`), no
/// fencing token, no auto-renewal.
///
/// Methods: `redlock_acquire_opts_new`, `redlock_acquire_opts_free`,
/// `redlock_acquire_opts_set_wait_ms`, `redlock_acquire_opts_set_retries`,
/// `redlock_acquire_opts_set_fenced`, `redlock_acquire_opts_set_auto_renew`,
/// `redlock_acquire_opts_set_notify`, `redlock_acquire_opts_set_cancel`,
/// `redlock_acquire_opts_set_owner` (`_set_owner_err`), `redlock_acquire_opts_set_shared`.
pub struct redlock_acquire_opts {
    /// `Handle::MAGIC` while live (see `super::Handle`).
    magic: u64,
    inner: LockOptions,
}

handle!(redlock_acquire_opts, b"RLKACQOP");

/// Creates acquisition options with every option at its default. Free them with
/// `redlock_acquire_opts_free`. Returns NULL only if memory is exhausted.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_acquire_opts_new() -> *mut redlock_acquire_opts {
    guard_or(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(redlock_acquire_opts {
            magic: <redlock_acquire_opts as super::Handle>::MAGIC,
            inner: LockOptions::new(),
        }))
    })
}

/// Frees acquisition options. NULL is a no-op, and so is a handle found freed already (best
/// effort: see `REDLOCK_STATUS_INVALID_HANDLE`).
///
/// # Safety
/// `opts` must be NULL or a pointer from `redlock_acquire_opts_new` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_free(opts: *mut redlock_acquire_opts) {
    guard_or((), || {
        // SAFETY: from Box::into_raw in redlock_acquire_opts_new, freed at most once per the
        // contract; a second free is detected (best effort) by `take`.
        if let Some(b) = unsafe { take(opts) } {
            release(b);
        }
    });
}

/// Applies `f` to the options behind `opts`; on error they are left unchanged.
///
/// # Safety
/// `opts` must be NULL or live options used by one thread at a time.
pub(super) unsafe fn with_opts(
    opts: *mut redlock_acquire_opts,
    f: impl FnOnce(LockOptions) -> Result<LockOptions, FfiError>,
) -> redlock_status {
    // SAFETY: per the contract; no error buffer.
    unsafe { with_opts_err(opts, std::ptr::null_mut(), 0, f) }
}

/// [`with_opts`], with the message of a failure in `err`.
///
/// # Safety
/// As [`with_opts`]; `err` NULL or `err_len` writable bytes.
unsafe fn with_opts_err(
    opts: *mut redlock_acquire_opts,
    err: *mut c_char,
    err_len: usize,
    f: impl FnOnce(LockOptions) -> Result<LockOptions, FfiError>,
) -> redlock_status {
    let run = || {
        // SAFETY: NULL or live, used by one thread at a time, per the contract (checked, best
        // effort).
        let o = unsafe { live_mut(opts, "opts") }?;
        o.inner = f(o.inner.clone())?;
        Ok(())
    };
    // SAFETY: NULL or `err_len` writable bytes, per the contract.
    unsafe { guard(err, err_len, run) }
}

/// How long to wait while the resource is held elsewhere: 0 means one attempt, no retry;
/// otherwise wait until `wait_ms` have passed, woken when the holder releases the resource (or
/// when its TTL runs out), and attempt again; no attempt starts after that, and the retry
/// count does not apply. `redlock_acquire_opts_set_notify(opts, false)` makes this wait poll
/// with random pauses (up to the retry delay) instead.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_wait_ms(
    opts: *mut redlock_acquire_opts,
    wait_ms: u32,
) -> redlock_status {
    let wait = match wait_ms {
        0 => Wait::No,
        ms => Wait::For(Duration::from_millis(ms.into())),
    };
    // SAFETY: per the contract.
    unsafe { with_opts(opts, |o| Ok(o.wait(wait))) }
}

/// Makes the lock **reentrant** for `owner` (`owner_len` bytes, 1 to `REDLOCK_MAX_OWNER_LEN`,
/// any bytes: a job id, a request id, `host:pid:thread`). The bytes are copied. An
/// acquisition by the same owner while it holds the lock succeeds at once; the resource stays
/// held until every lease of that owner has been released (or has expired). Each acquisition
/// returns its own lease, released on its own. Another owner, and a plain acquisition, are
/// refused meanwhile.
///
/// The owner is the identity: another thread or process presenting the same owner is the same
/// owner (how a restarted worker reclaims its job's lock at once; never share an owner id
/// between workers). `owner == NULL` with `owner_len == 0` removes the owner: not reentrant,
/// the default. With `redlock_acquire_opts_set_fenced`, every lease of one tenure of the owner
/// carries the same fencing token.
///
/// Statuses: OK, NULL_ARGUMENT (`owner` NULL with a non-zero length), INVALID_ARGUMENT (an
/// empty or oversized owner; the options are unchanged), INVALID_HANDLE. Without an error
/// buffer: `redlock_acquire_opts_set_owner_err` is the same, and says why in `err`.
///
/// # Safety
/// `opts` must be live options; `owner` must point to `owner_len` readable bytes, or be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_owner(
    opts: *mut redlock_acquire_opts,
    owner: *const u8,
    owner_len: usize,
) -> redlock_status {
    // SAFETY: per the contract; no error buffer.
    unsafe { redlock_acquire_opts_set_owner_err(opts, owner, owner_len, std::ptr::null_mut(), 0) }
}

/// `redlock_acquire_opts_set_owner`, with an error buffer: on failure `err` says which
/// argument is wrong and why (`owner id is 600 bytes; it must be 1 to 512 bytes`).
///
/// Statuses: as `redlock_acquire_opts_set_owner`.
///
/// # Safety
/// `opts` must be live options; `owner` must point to `owner_len` readable bytes, or be NULL;
/// `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_owner_err(
    opts: *mut redlock_acquire_opts,
    owner: *const u8,
    owner_len: usize,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe {
        with_opts_err(opts, err, err_len, |o| {
            if owner.is_null() && owner_len == 0 {
                return Ok(o.no_owner());
            }
            // SAFETY: `owner_len` readable bytes at `owner`, per the contract.
            let id = bytes(owner, owner_len, "owner")?;
            if id.is_empty() || id.len() > super::REDLOCK_MAX_OWNER_LEN {
                return Err(FfiError::invalid(format!(
                    "owner id is {} bytes; it must be 1 to {} bytes",
                    id.len(),
                    super::REDLOCK_MAX_OWNER_LEN
                )));
            }
            Ok(o.owner(id))
        })
    }
}

/// Whether a wait set with `redlock_acquire_opts_set_wait_ms` sleeps until a release is
/// announced (true, the default) or polls with random pauses of up to the retry delay (false).
/// A notification costs one subscriber connection per node and manager, shared by every
/// waiter, opened on the first wait.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_notify(
    opts: *mut redlock_acquire_opts,
    notify: bool,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { with_opts(opts, |o| Ok(o.notify(notify))) }
}

/// Restores the default wait: the manager's retry policy (`redlock_config_set_retry`).
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_retries(
    opts: *mut redlock_acquire_opts,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { with_opts(opts, |o| Ok(o.wait(Wait::Retries))) }
}

/// Whether the lease carries a fencing token (`redlock_lease_fencing_token`): strictly greater
/// than that of every earlier fenced grant of the resource, while a majority of the nodes keeps
/// its data. Costs a second round trip: the token is read from the granting quorum's counters
/// (`redlock-fence:<resource>`, which never expire) and written back before the grant counts.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_fenced(
    opts: *mut redlock_acquire_opts,
    fenced: bool,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { with_opts(opts, |o| Ok(o.fenced(fenced))) }
}

/// Makes the lock **shared** (a read lock, as `flock(LOCK_SH)`) when `shared` is true;
/// exclusive (as `flock(LOCK_EX)`, the default) when false. Any number of shared holders may
/// hold a resource together; an exclusive holder of the same resource name excludes them all,
/// and they exclude it. A shared lock has no owner: `redlock_acquire` with both is
/// INVALID_ARGUMENT. Extension, auto-renewal, fencing and waiting work in both modes.
///
/// A waiting exclusive locker is not starved by overlapping shared holders: once it has been
/// refused by them it queues an intent, and new shared acquisitions wait behind it while the
/// holders already in finish. The intent lives at most the remaining TTL of those shared holds
/// plus the exclusive locker's TTL, is renewed by each of its refused attempts, and is removed
/// when it gets the lock or gives up. An exclusive acquisition with a wait of 0 queues nothing.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_shared(
    opts: *mut redlock_acquire_opts,
    shared: bool,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { with_opts(opts, |o| Ok(o.shared(shared))) }
}

/// Makes the lock **fair** (first come, first served) when `fair` is true: waiters are granted
/// the lock in the order they asked for it, across every process and node, and a release wakes
/// the next waiter alone. A refused fair acquisition takes a ticket from a quorum of the
/// nodes and queues it on every node (one more round trip); each node grants only to the
/// lowest live ticket, when the key is free. `redlock_lease_ticket` gives a lease's ticket.
///
/// A waiter refreshes its place with an attempt at least every fifth of its drop-out time
/// (`redlock_acquire_opts_set_drop_out_ms`); one that dies or is paused holds up the waiters
/// behind it for at most that time, and one that gives up (wait over, cancelled) leaves the
/// queue at once. Fair and plain acquisitions of one resource exclude each other as any two
/// locks do, but a plain one does not queue, so it may take the lock ahead of fair waiters.
/// Fair with an owner or shared, or for `redlock_acquire_many` or a semaphore, is
/// INVALID_ARGUMENT at the acquisition. With a wait of 0, a fair acquisition takes the lock
/// only when it is free and nobody is queued, and queues nothing.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_fair(
    opts: *mut redlock_acquire_opts,
    fair: bool,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { with_opts(opts, |o| Ok(o.fair(fair))) }
}

/// A fair waiter's drop-out time in milliseconds (`redlock_acquire_opts_set_fair`): the
/// longest a waiter that stops refreshing its place (it died, or is paused) holds up the
/// waiters behind it. 0 means the default: the lock's TTL or `REDLOCK_DEFAULT_DROP_OUT_MS`,
/// whichever is shorter. A shorter time costs more refreshes (one attempt per waiter every
/// fifth of it).
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE, INVALID_ARGUMENT (outside
/// `REDLOCK_MIN_DROP_OUT_MS` to `REDLOCK_MAX_DROP_OUT_MS`; the options are unchanged). Setting
/// it without fair makes the acquisition INVALID_ARGUMENT.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_drop_out_ms(
    opts: *mut redlock_acquire_opts,
    drop_out_ms: u32,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe {
        with_opts(opts, |o| {
            if drop_out_ms == 0 {
                return Ok(o.no_drop_out());
            }
            let d = Duration::from_millis(drop_out_ms.into());
            if !(crate::MIN_DROP_OUT..=crate::MAX_DROP_OUT).contains(&d) {
                return Err(FfiError::invalid(format!(
                    "drop-out time {drop_out_ms} ms; it must be {} to {} ms (0: the default)",
                    super::REDLOCK_MIN_DROP_OUT_MS,
                    super::REDLOCK_MAX_DROP_OUT_MS
                )));
            }
            Ok(o.drop_out(d))
        })
    }
}

/// Turns on auto-renewal for the lease as soon as it is granted, as
/// `redlock_lease_auto_renew(lease, max_hold_ms, max_extensions, NULL, NULL, …)` would
/// (0 means the default for each: one hour; no limit besides the hold time). For an `on_lost`
/// callback, call `redlock_lease_auto_renew` on the lease instead.
///
/// Statuses: OK, NULL_ARGUMENT, INVALID_HANDLE.
///
/// # Safety
/// `opts` must be live options.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_opts_set_auto_renew(
    opts: *mut redlock_acquire_opts,
    max_hold_ms: u32,
    max_extensions: u32,
) -> redlock_status {
    let renew = renew_options(max_hold_ms, max_extensions);
    // SAFETY: per the contract.
    unsafe { with_opts(opts, |o| Ok(o.auto_renew(renew))) }
}

/// Renewal options from the C arguments (0: the default).
pub(crate) fn renew_options(max_hold_ms: impl Into<u64>, max_extensions: u32) -> RenewOptions {
    let mut opts = RenewOptions::new();
    let max_hold_ms: u64 = max_hold_ms.into();
    if max_hold_ms > 0 {
        opts = opts.max_hold(Duration::from_millis(max_hold_ms));
    }
    if max_extensions > 0 {
        opts = opts.max_extensions(max_extensions);
    }
    opts
}

/// Acquires `resource` for `ttl_ms` with `opts` (NULL: the defaults, which wait as the
/// manager's retry policy says). Never blocks forever: at most about the wait, or
/// `(retry_count + 1) × (node timeout + retry_delay_ms)` with the retry policy.
///
/// The resource is 1 to `REDLOCK_MAX_RESOURCE_LEN` arbitrary bytes (NUL, CR/LF and invalid
/// UTF-8 are fine); `(NULL, 0)` is the empty name and is rejected. `ttl_ms` must exceed its
/// own drift allowance (`ttl_ms × factor + 2`), so 0..2 are rejected, and must not exceed the
/// manager's maximum TTL.
///
/// Statuses: OK (`*out` receives a lease to free with `redlock_lease_free`), NOT_ACQUIRED,
/// UNAVAILABLE, AUTH, CANCELLED (`redlock_acquire_opts_set_cancel`), INVALID_ARGUMENT,
/// NULL_ARGUMENT (`mgr`, `out`, or `resource` with a non-zero length), INVALID_HANDLE (`mgr`,
/// `opts`), INTERNAL. `*out` is written only on success; `err` names each node's
/// outcome.
///
/// # Safety
/// `mgr` must be a live manager; `resource` must point to `resource_len` readable bytes;
/// `opts` NULL or live options; `out` writable; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire(
    mgr: *mut redlock_manager,
    resource: *const u8,
    resource_len: usize,
    ttl_ms: u32,
    opts: *const redlock_acquire_opts,
    out: *mut *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let defaults = LockOptions::new();
    // SAFETY: NULL or live options per the contract.
    let opts = match unsafe { opts_or(opts, &defaults) } {
        Ok(o) => o,
        // SAFETY: `err` per the contract.
        Err(e) => return unsafe { guard(err, err_len, || Err(e)) },
    };
    // SAFETY: per the contract.
    unsafe {
        acquire(
            (mgr, resource, resource_len, ttl_ms),
            (out, err, err_len),
            opts,
        )
    }
}

/// Acquires **every** resource of `resources` for `ttl_ms`, or none: one lease that covers
/// them all (`redlock_unlock`, `redlock_extend`, validity and auto-renewal act on the set;
/// `redlock_lease_resource_count` and `redlock_lease_resource_at` list them). Resource `i` is
/// `resource_lens[i]` bytes at `resources[i]`, each as for `redlock_acquire`.
///
/// Each node sets every resource's key or none, in one script, so callers naming overlapping
/// sets in any order never deadlock; the lock is held when a quorum granted all of them, and a
/// failed attempt takes its grants back everywhere. A plain or shared lock of any one of the
/// resources excludes the set, and the other way round. One round trip per step, whatever
/// the count. Waiting (`opts`) retries after random pauses of up to the retry delay.
///
/// Statuses: as `redlock_acquire`. INVALID_ARGUMENT (nothing sent) for `count` 0 or above
/// `REDLOCK_MAX_RESOURCES`, a resource named twice, an invalid resource or TTL, or options
/// set with `redlock_acquire_opts_set_shared`, `_set_owner` or `_set_fenced` (acquire such
/// resources one at a time). NULL_ARGUMENT for `resources` or `resource_lens` NULL with a
/// non-zero count, or a NULL resource with a non-zero length.
///
/// # Safety
/// `mgr` must be a live manager; `resources` and `resource_lens` must each point to `count`
/// readable elements (or be NULL when `count` is 0), each resource to its length's readable
/// bytes; `opts` NULL or live options; `out` writable; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_acquire_many(
    mgr: *mut redlock_manager,
    resources: *const *const u8,
    resource_lens: *const usize,
    count: usize,
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
        // SAFETY: per the contract.
        let names = unsafe { names_of(resources, resource_lens, count) }?;
        let ttl = Duration::from_millis(ttl_ms.into());
        let lease = m.acquire_many(&names, ttl, opts)?;
        // SAFETY: `out` is non-NULL (checked above) and writable per the contract.
        unsafe { hand_out(lease, out) }
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// Takes one permit of the counting semaphore `name` (`name_len` bytes, as a resource name)
/// of `permits` permits for `ttl_ms`: at most `permits` valid leases of one semaphore exist at
/// any instant, under the same assumptions as the lock. The lease is the permit:
/// `redlock_unlock`, `redlock_extend`, validity, auto-renewal, fencing tokens (each strictly
/// greater than every earlier holder's of the same slot), waiting woken by a release (one
/// waiter per release in each process) and cancellation work on it as on a lock, with the
/// same `opts`; `redlock_lease_permit` tells which slot it holds.
///
/// A permit is one of `permits` slots, held by a quorum of nodes exactly as a lock is: one
/// round trip when the nodes agree on which slots are free, two when they picked different
/// ones. A holder that dies gives its permit back when its TTL runs out. A semaphore and a
/// lock of the same name are independent.
///
/// Every caller of one semaphore must name the same `permits`: the count is recorded on each
/// node with the holds, and a call naming another one while permits of the recorded count are
/// held fails with INVALID_ARGUMENT, whose message names the recorded count (a new count
/// applies once no permit is held).
///
/// Statuses: as `redlock_acquire` (NOT_ACQUIRED: every permit is held). INVALID_ARGUMENT
/// (nothing sent) for `permits` 0 or above `REDLOCK_MAX_PERMITS`, an invalid name or TTL,
/// or options set with `redlock_acquire_opts_set_owner` or `_set_shared`; and for another
/// recorded count, as above.
///
/// # Safety
/// `mgr` must be a live manager; `name` must point to `name_len` readable bytes (or be NULL
/// when `name_len` is 0); `opts` NULL or live options; `out` writable; `err` NULL or
/// `err_len` writable bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // the contract's signature
pub unsafe extern "C" fn redlock_semaphore_acquire(
    mgr: *mut redlock_manager,
    name: *const u8,
    name_len: usize,
    permits: u32,
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
        // SAFETY: `name_len` readable bytes at `name`, per the contract.
        let name = unsafe { bytes(name, name_len, "name") }?;
        let ttl = Duration::from_millis(ttl_ms.into());
        let lease = m.semaphore_acquire(name, permits, ttl, opts)?;
        // SAFETY: `out` is non-NULL (checked above) and writable per the contract.
        unsafe { hand_out(lease, out) }
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// The options `opts` points to, or `defaults` for NULL.
///
/// # Safety
/// `opts` must be NULL or live options (checked, best effort); they are only read.
pub(super) unsafe fn opts_or(
    opts: *const redlock_acquire_opts,
    defaults: &LockOptions,
) -> Result<&LockOptions, FfiError> {
    if opts.is_null() {
        return Ok(defaults);
    }
    // SAFETY: live options per this function's contract (checked, best effort).
    Ok(&unsafe { live(opts, "opts") }?.inner)
}

/// The `count` resource names of a multi-resource call.
///
/// # Safety
/// `resources` and `resource_lens` must each point to `count` readable elements (or be NULL
/// when `count` is 0), each resource to its length's readable bytes.
pub(super) unsafe fn names_of<'a>(
    resources: *const *const u8,
    resource_lens: *const usize,
    count: usize,
) -> Result<Vec<&'a [u8]>, FfiError> {
    if count > 0 && (resources.is_null() || resource_lens.is_null()) {
        return Err(FfiError::null(if resources.is_null() {
            "resources"
        } else {
            "resource_lens"
        }));
    }
    if count > crate::MAX_RESOURCES {
        return Err(FfiError::invalid(format!(
            "{count} resources; the limit is {} per call",
            crate::MAX_RESOURCES
        )));
    }
    let mut names: Vec<&[u8]> = Vec::with_capacity(count);
    for i in 0..count {
        // SAFETY: `count` readable elements in each array, per the contract (both non-NULL
        // when count > 0, checked above).
        let (p, n) = unsafe { (*resources.add(i), *resource_lens.add(i)) };
        // SAFETY: `n` readable bytes at `p`, per the contract.
        names.push(unsafe { bytes(p, n, "resource") }?);
    }
    Ok(names)
}

/// Hands `lease` to the caller through `out`.
///
/// # Safety
/// `out` must be non-NULL and writable.
pub(super) unsafe fn hand_out(
    lease: crate::Lease,
    out: *mut *mut redlock_lease,
) -> Result<(), FfiError> {
    let raw = Box::into_raw(Box::new(redlock_lease::new(lease)?));
    // SAFETY: non-NULL and writable per this function's contract.
    unsafe { *out = raw };
    Ok(())
}

/// What to acquire: the manager, the resource and the TTL.
type What = (*mut redlock_manager, *const u8, usize, u32);

/// Where the result goes: the lease, and the error buffer.
type Out = (*mut *mut redlock_lease, *mut c_char, usize);

/// The body of every acquisition function.
///
/// # Safety
/// As for `redlock_acquire`.
unsafe fn acquire(what: What, to: Out, opts: &LockOptions) -> redlock_status {
    let ((mgr, resource, resource_len, ttl_ms), (out, err, err_len)) = (what, to);
    let f = || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort); shared
        // access is thread-safe.
        let m = unsafe { manager_ref(mgr) }?;
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        // SAFETY: `resource` points to `resource_len` readable bytes per the contract.
        let res = unsafe { bytes(resource, resource_len, "resource") }?;
        let ttl = Duration::from_millis(ttl_ms.into());
        let lease = m.acquire(res, ttl, opts)?;
        // SAFETY: `out` is non-NULL (checked above) and writable per the contract.
        unsafe { hand_out(lease, out) }
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// Acquires `resource` for `ttl_ms`, retrying as configured (`redlock_config_set_retry`):
/// `redlock_acquire` with default options. Same arguments and statuses.
///
/// # Safety
/// As for `redlock_acquire`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock(
    mgr: *mut redlock_manager,
    resource: *const u8,
    resource_len: usize,
    ttl_ms: u32,
    out: *mut *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let opts = LockOptions::new();
    // SAFETY: per the contract.
    unsafe {
        acquire(
            (mgr, resource, resource_len, ttl_ms),
            (out, err, err_len),
            &opts,
        )
    }
}

/// One attempt to acquire `resource` for `ttl_ms`, with no retry: `redlock_acquire` with a
/// wait of 0. Same arguments and statuses as `redlock_lock`.
///
/// # Safety
/// As for `redlock_acquire`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_try_lock(
    mgr: *mut redlock_manager,
    resource: *const u8,
    resource_len: usize,
    ttl_ms: u32,
    out: *mut *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let opts = LockOptions::new().wait(Wait::No);
    // SAFETY: per the contract.
    unsafe {
        acquire(
            (mgr, resource, resource_len, ttl_ms),
            (out, err, err_len),
            &opts,
        )
    }
}

/// Acquires `resource` for `ttl_ms`, retrying after random pauses (up to the retry delay)
/// until `wait_ms` have passed; no attempt starts after that. The retry count does not apply.
/// Same statuses as `redlock_lock`. (`wait_ms` = 0 waits not at all.)
///
/// # Safety
/// As for `redlock_acquire`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_wait(
    mgr: *mut redlock_manager,
    resource: *const u8,
    resource_len: usize,
    ttl_ms: u32,
    wait_ms: u32,
    out: *mut *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let opts = LockOptions::new().wait(Wait::For(Duration::from_millis(wait_ms.into())));
    // SAFETY: per the contract.
    unsafe {
        acquire(
            (mgr, resource, resource_len, ttl_ms),
            (out, err, err_len),
            &opts,
        )
    }
}

/// Flag for `redlock_lock_opts`: grant a fencing token (`redlock_lease_fencing_token`).
pub const REDLOCK_LOCK_FENCED: u32 = 1;
/// Flag for `redlock_lock_opts`: one attempt, no retry (like `redlock_try_lock`).
pub const REDLOCK_LOCK_ONCE: u32 = 2;
/// Flag for `redlock_lock_opts`: retry until `wait_ms` have passed (like `redlock_lock_wait`).
pub const REDLOCK_LOCK_WAIT: u32 = 4;

/// Acquires `resource` for `ttl_ms` with options given as flags (`redlock_acquire` with an
/// options builder covers the same and more):
///
/// * `REDLOCK_LOCK_FENCED`: the lease carries a fencing token (see
///   `redlock_acquire_opts_set_fenced`).
/// * `REDLOCK_LOCK_ONCE`: one attempt; `REDLOCK_LOCK_WAIT`: retry until `wait_ms`; neither:
///   retry as configured. ONCE and WAIT together are INVALID_ARGUMENT, as are unknown flags.
///
/// Statuses and arguments otherwise as for `redlock_lock`.
///
/// # Safety
/// As for `redlock_acquire`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lock_opts(
    mgr: *mut redlock_manager,
    resource: *const u8,
    resource_len: usize,
    ttl_ms: u32,
    flags: u32,
    wait_ms: u32,
    out: *mut *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let known = REDLOCK_LOCK_FENCED | REDLOCK_LOCK_ONCE | REDLOCK_LOCK_WAIT;
    let once = flags & REDLOCK_LOCK_ONCE != 0;
    let wait = flags & REDLOCK_LOCK_WAIT != 0;
    let bad = if flags & !known != 0 {
        Some(format!("unknown flags {:#x}", flags & !known))
    } else if once && wait {
        Some("REDLOCK_LOCK_ONCE and REDLOCK_LOCK_WAIT are exclusive".to_string())
    } else {
        None
    };
    if let Some(msg) = bad {
        // SAFETY: `err` per the contract.
        return unsafe { guard(err, err_len, || Err(FfiError::invalid(msg))) };
    }
    let wait = match (once, wait) {
        (true, _) => Wait::No,
        (false, true) => Wait::For(Duration::from_millis(wait_ms.into())),
        (false, false) => Wait::Retries,
    };
    let opts = LockOptions::new()
        .wait(wait)
        .fenced(flags & REDLOCK_LOCK_FENCED != 0);
    // SAFETY: per the contract.
    unsafe {
        acquire(
            (mgr, resource, resource_len, ttl_ms),
            (out, err, err_len),
            &opts,
        )
    }
}
