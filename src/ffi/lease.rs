//! `redlock_lease`: what an acquisition returns — release, extension, accessors, auto-renewal
//! and its callback.

use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use super::{
    FfiError, guard, guard_or, handle, live, live_or_none, redlock_status, release, renew_options,
    take, write_str,
};
use crate::{Lease, NodeOutcome};

/// A held lock (named lease because the function `redlock_lock` takes the name).
///
/// Calls on one lease from several threads are serialised internally; only
/// `redlock_lease_free` must not race with other calls on the same lease. Freeing a lease does
/// not unlock it (the lock then expires after its TTL). Handles must not be used in a child
/// process after `fork()`: they share the parent's sockets, and the renewal thread does not
/// survive the fork.
///
/// Methods: `redlock_unlock`, `redlock_extend`, `redlock_lease_validity_ms`,
/// `redlock_lease_is_valid`, `redlock_lease_token`, `redlock_lease_value`, `redlock_lease_resource`,
/// `redlock_lease_node_count`, `redlock_lease_granted`, `redlock_lease_node_outcomes`,
/// `redlock_lease_auto_renew`, `redlock_lease_stop_renewal`, `redlock_lease_is_renewing`,
/// `redlock_lease_is_lost`, `redlock_lease_wait_lost`, `redlock_lease_lost_reason`,
/// `redlock_lease_ttl_ms`, `redlock_lease_fencing_token`, `redlock_lease_free`.
pub struct redlock_lease {
    /// `Handle::MAGIC` while live (see `super::Handle`).
    magic: u64,
    pub(super) inner: Lease,
    token: CString,
    value: CString,
    /// Keeps an `on_lost` callback from running with this handle once it is freed.
    gate: Arc<CallbackGate>,
}

impl redlock_lease {
    pub(crate) fn new(inner: Lease) -> Result<redlock_lease, FfiError> {
        let token = CString::new(inner.token()).map_err(|_| FfiError::invalid("token"))?;
        let value = CString::new(inner.value()).map_err(|_| FfiError::invalid("value"))?;
        Ok(redlock_lease {
            magic: <redlock_lease as super::Handle>::MAGIC,
            inner,
            token,
            value,
            gate: Arc::default(),
        })
    }
}

handle!(redlock_lease, b"RLKLEASE");

/// Reads something of the lease behind `lease`: `fallback` for NULL, an invalid handle (best
/// effort) or a panic.
///
/// # Safety
/// `lease` must be NULL or a live lease.
unsafe fn read<T: Copy>(
    lease: *const redlock_lease,
    fallback: T,
    f: impl FnOnce(&redlock_lease) -> T,
) -> T {
    // SAFETY: NULL or live per this function's contract (checked, best effort); only shared
    // access.
    guard_or(fallback, || {
        unsafe { live_or_none(lease) }.map_or(fallback, f)
    })
}

/// Runs `f` on the lease behind `lease`, turning its error into a status and `err`.
///
/// # Safety
/// `lease` must be NULL or a live lease; `err` NULL or `err_len` writable bytes.
pub(super) unsafe fn with_lease(
    lease: *const redlock_lease,
    err: *mut c_char,
    err_len: usize,
    f: impl FnOnce(&redlock_lease) -> Result<(), FfiError>,
) -> redlock_status {
    let run = || {
        // SAFETY: NULL or a live lease per the contract (checked, best effort); Lease methods
        // take &self and serialise internally.
        f(unsafe { live(lease, "lease") }?)
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, run) }
}

/// Guards the C callback against `redlock_lease_free`: free waits for a running callback
/// (unless the callback itself is freeing the lease) and stops later ones.
#[derive(Default)]
struct CallbackGate {
    state: Mutex<GateState>,
    done: Condvar,
}

#[derive(Default)]
struct GateState {
    freed: bool,
    running_on: Option<ThreadId>,
}

impl CallbackGate {
    fn run(&self, f: impl FnOnce()) {
        {
            let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if g.freed {
                return;
            }
            g.running_on = Some(thread::current().id());
        }
        f();
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.running_on = None;
        self.done.notify_all();
    }

    fn close(&self) {
        let me = thread::current().id();
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.freed = true;
        while g.running_on.is_some_and(|t| t != me) {
            g = self.done.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// What happened on one node during a lease's acquisition. Stable numbers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_node_outcome {
    /// The node granted the lock.
    REDLOCK_NODE_SUCCESS = 0,
    /// The node answered that the key is held by another owner.
    REDLOCK_NODE_REJECTED = 1,
    /// Sent, but the quorum was reached before this node answered.
    REDLOCK_NODE_PENDING = 2,
    /// No answer within the per-node timeout.
    REDLOCK_NODE_TIMEOUT = 3,
    /// Connection refused, reset or closed.
    REDLOCK_NODE_UNREACHABLE = 4,
    /// Not contacted: waiting out a reconnect backoff after a recent failure.
    REDLOCK_NODE_BACKOFF = 5,
    /// The node answered with an error (`-ERR`, `-WRONGPASS`, …). A refusal of this client's
    /// credentials (`WRONGPASS`, `NOAUTH`, `NOPERM`) is one, also while the node waits out
    /// the reconnect backoff that follows it.
    REDLOCK_NODE_SERVER_ERROR = 6,
    /// The node's answer was not valid RESP or not the expected reply.
    REDLOCK_NODE_PROTOCOL = 7,
    /// Not counted: the node may have lost keys it held (restart quarantine; see
    /// `redlock_manager_node_quarantine_reason`).
    REDLOCK_NODE_QUARANTINED = 8,
    /// Not counted: the node is the same server as a lower-indexed node (the same `run_id`,
    /// reached through another address).
    REDLOCK_NODE_DUPLICATE = 9,
    /// The TLS session with a `rediss://` node failed: its certificate is not trusted (unknown
    /// CA, expired, another name), it refused ours or wanted one this client lacks, or it does
    /// not speak TLS. Also while the node waits out the reconnect backoff that follows.
    REDLOCK_NODE_TLS = 10,
    /// A failover group's master could not be found or confirmed (no sentinel answered, the
    /// service is unknown to them, they disagree, or the server they name is not a master).
    REDLOCK_NODE_SENTINEL = 11,
    /// A failover group granted, but fewer of its replicas acknowledged the grant in time than
    /// `redlock_config_set_replica_acks` asks for: it does not count (and was released).
    REDLOCK_NODE_UNACKNOWLEDGED = 12,
}

impl From<&NodeOutcome> for redlock_node_outcome {
    fn from(o: &NodeOutcome) -> Self {
        use redlock_node_outcome::*;
        match o {
            NodeOutcome::Success => REDLOCK_NODE_SUCCESS,
            NodeOutcome::Rejected => REDLOCK_NODE_REJECTED,
            NodeOutcome::Pending => REDLOCK_NODE_PENDING,
            NodeOutcome::Timeout => REDLOCK_NODE_TIMEOUT,
            NodeOutcome::Unreachable(_) => REDLOCK_NODE_UNREACHABLE,
            NodeOutcome::Backoff(_) => REDLOCK_NODE_BACKOFF,
            NodeOutcome::ServerError(_) | NodeOutcome::AuthFailed(_) => REDLOCK_NODE_SERVER_ERROR,
            NodeOutcome::Protocol(_) => REDLOCK_NODE_PROTOCOL,
            NodeOutcome::Quarantined { .. } => REDLOCK_NODE_QUARANTINED,
            NodeOutcome::Duplicate { .. } => REDLOCK_NODE_DUPLICATE,
            NodeOutcome::Tls(_) => REDLOCK_NODE_TLS,
            NodeOutcome::Sentinel(_) => REDLOCK_NODE_SENTINEL,
            NodeOutcome::Unacknowledged { .. } => REDLOCK_NODE_UNACKNOWLEDGED,
        }
    }
}

/// Extends the lock to `ttl_ms` from now, if a quorum confirms before the current validity
/// ends. Never recreates an expired key; refuses (NOT_HELD, nothing sent) a lease whose
/// validity already ended or that was unlocked.
///
/// Statuses: OK, NOT_HELD, UNAVAILABLE, AUTH, INVALID_ARGUMENT (TTL), NULL_ARGUMENT,
/// INVALID_HANDLE, INTERNAL.
///
/// # Safety
/// `lease` must be a live lease; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_extend(
    lease: *mut redlock_lease,
    ttl_ms: u32,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let ttl = Duration::from_millis(ttl_ms.into());
    // SAFETY: per the contract.
    unsafe { with_lease(lease, err, err_len, |l| Ok(l.inner.extend(ttl)?)) }
}

/// Releases the lock on every node (owner-checked: never deletes another owner's key). Does
/// not free the lease. From this call on the lease's validity reads 0.
///
/// Statuses: OK, NOT_HELD (expired, already unlocked, or not confirmed by a quorum),
/// UNAVAILABLE, AUTH, NULL_ARGUMENT, INVALID_HANDLE, INTERNAL. A second unlock returns NOT_HELD
/// at once.
///
/// # Safety
/// `lease` must be a live lease; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_unlock(
    lease: *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: per the contract.
    unsafe { with_lease(lease, err, err_len, |l| Ok(l.inner.unlock()?)) }
}

/// The lease's fencing token (see `redlock_acquire_opts_set_fenced`); 0 for a lease taken
/// without one, and for NULL or an invalid handle. Exact over the whole 64-bit range: a counter
/// that reached `UINT64_MAX` refuses the next fenced grant (`REDLOCK_STATUS_INTERNAL`,
/// "fencing counter … exhausted") rather than repeat a token.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_fencing_token(lease: *const redlock_lease) -> u64 {
    // SAFETY: per the contract.
    unsafe { read(lease, 0, |l| l.inner.fencing_token().unwrap_or(0)) }
}

/// True while auto-renewal is on for the lease (started, not stopped, unlocked, lost or at
/// its bound). Never waits (nor does `redlock_lease_is_lost`). False for NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_is_renewing(lease: *const redlock_lease) -> bool {
    // SAFETY: per the contract.
    unsafe { read(lease, false, |l| l.inner.is_renewing()) }
}

/// Why the lease was lost, snprintf-style: if it is lost, writes at most `len - 1` bytes of
/// the reason and a NUL into `buf` (nothing when `buf` is NULL or `len` is 0), for example
/// `maximum hold time reached after 3000 ms` or `renewal failed: 1/5 extended (quorum 3);
/// node 2 (…): connection refused; …`, and returns the reason's full length (so a return
/// value `>= len` means it was cut short). Returns 0, writing nothing, if the lease is not lost
/// (or NULL, or invalid).
///
/// # Safety
/// `lease` must be NULL or a live lease; `buf` NULL or `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_lost_reason(
    lease: *const redlock_lease,
    buf: *mut c_char,
    len: usize,
) -> usize {
    let text = |l: &redlock_lease| l.inner.lost_reason().map(|r| r.to_string());
    // SAFETY: per the contract (checked, best effort).
    guard_or(0, || {
        match unsafe { live_or_none(lease) }.and_then(text) {
            Some(t) => {
                // SAFETY: `buf` is NULL or `len` writable bytes per the contract.
                unsafe { write_str(buf, len, &t) };
                t.len()
            }
            None => 0,
        }
    })
}

/// The TTL of the lease's last successful acquisition or extension, in milliseconds (0 for
/// NULL).
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_ttl_ms(lease: *const redlock_lease) -> u32 {
    // SAFETY: per the contract.
    unsafe { read(lease, 0, |l| millis(l.inner.ttl())) }
}

fn millis(d: Duration) -> u32 {
    d.as_millis().min(u32::MAX as u128) as u32
}

/// The remaining validity in milliseconds (rounded down): 0 once expired, unlocked or NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_validity_ms(lease: *const redlock_lease) -> u32 {
    // SAFETY: per the contract.
    unsafe { read(lease, 0, |l| millis(l.inner.validity())) }
}

/// True while the remaining validity is positive (false for NULL or an invalid handle).
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_is_valid(lease: *const redlock_lease) -> bool {
    // SAFETY: per the contract.
    unsafe { read(lease, false, |l| l.inner.is_valid()) }
}

/// The lease's random token: 40 hex characters, NUL-terminated, owned by the lease (valid
/// until `redlock_lease_free`). It is not what the nodes store under the lock's key: that is
/// `redlock_lease_value`, which for a plain lock begins with the token
/// (`<token>.<unix ms>[ <label>]`); for a reentrant or shared lock and a semaphore's permit
/// the token names the lease's hold (`hold:<token>`). NULL for NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_token(lease: *const redlock_lease) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(lease, std::ptr::null(), |l| l.token.as_ptr()) }
}

/// What the lease stores on the nodes (not `redlock_lease_token`, which it begins with),
/// NUL-terminated, owned by the lease (valid until `redlock_lease_free`): for a plain lock
/// `<token>.<unix ms>[ <label>]`, the token, then `.` and the wall-clock milliseconds at which
/// the attempt started, then a space and the manager's label if it has one
/// (`redlock_config_set_label`); for a reentrant or shared lock and a semaphore's permit the
/// token. It is the identity
/// `redlock_holders_id` reports for this lease. NULL for NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_value(lease: *const redlock_lease) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { read(lease, std::ptr::null(), |l| l.value.as_ptr()) }
}

/// The resource name: `*len` receives its length (if `len` is not NULL); the bytes are owned
/// by the lease and are not NUL-terminated. NULL for NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease; `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_resource(
    lease: *const redlock_lease,
    len: *mut usize,
) -> *const u8 {
    let f = |l: &redlock_lease| {
        let r = l.inner.resource();
        if !len.is_null() {
            // SAFETY: non-NULL and writable per the contract.
            unsafe { *len = r.len() };
        }
        r.as_ptr()
    };
    // SAFETY: per the contract.
    unsafe { read(lease, std::ptr::null(), f) }
}

/// How many resources the lease holds: 1, or the count given to `redlock_acquire_many` (0 for
/// NULL or an invalid handle).
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_resource_count(lease: *const redlock_lease) -> usize {
    // SAFETY: per the contract.
    unsafe { read(lease, 0, |l| l.inner.resources().len()) }
}

/// Resource `index` (from 0, in the caller's order) of the lease, as
/// `redlock_lease_resource` gives the first: `*len` receives its length (if `len` is not
/// NULL); the bytes are owned by the lease and are not NUL-terminated. NULL for NULL, an
/// invalid handle or an index out of range.
///
/// # Safety
/// `lease` must be NULL or a live lease; `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_resource_at(
    lease: *const redlock_lease,
    index: usize,
    len: *mut usize,
) -> *const u8 {
    let f = |l: &redlock_lease| match l.inner.resources().get(index) {
        Some(r) => {
            if !len.is_null() {
                // SAFETY: non-NULL and writable per the contract.
                unsafe { *len = r.len() };
            }
            r.as_ptr()
        }
        None => std::ptr::null(),
    };
    // SAFETY: per the contract.
    unsafe { read(lease, std::ptr::null(), f) }
}

/// True for a shared lease (`redlock_acquire_opts_set_shared`); false for an exclusive one,
/// NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_is_shared(lease: *const redlock_lease) -> bool {
    // SAFETY: per the contract.
    unsafe { read(lease, false, |l| l.inner.is_shared()) }
}

/// For a fair lock (`redlock_acquire_opts_set_fair`) that queued: true, with its ticket in
/// `*ticket` if not NULL. Tickets order a resource's waiters (lower first; waiters that queued
/// at the same time may share one). False, writing nothing, for a fair lock granted at once
/// with nobody queued, for any other lease, NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease; `ticket` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_ticket(
    lease: *const redlock_lease,
    ticket: *mut u64,
) -> bool {
    let f = |l: &redlock_lease| match l.inner.ticket() {
        Some(t) => {
            if !ticket.is_null() {
                // SAFETY: writable per the contract.
                unsafe { *ticket = t };
            }
            true
        }
        None => false,
    };
    // SAFETY: per the contract.
    unsafe { read(lease, false, f) }
}

/// For a semaphore's permit (`redlock_semaphore_acquire`): true, with the slot it holds (0 to
/// permits − 1; no two valid permits of one semaphore hold the same slot) in `*slot` and the
/// semaphore's permit count in `*permits`, each if not NULL. False for a lock, NULL or an
/// invalid handle, and nothing is written.
///
/// # Safety
/// `lease` must be NULL or a live lease; `slot` and `permits` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_permit(
    lease: *const redlock_lease,
    slot: *mut u32,
    permits: *mut u32,
) -> bool {
    let f = |l: &redlock_lease| match l.inner.permit() {
        Some((s, p)) => {
            if !slot.is_null() {
                // SAFETY: writable per the contract.
                unsafe { *slot = s };
            }
            if !permits.is_null() {
                // SAFETY: writable per the contract.
                unsafe { *permits = p };
            }
            true
        }
        None => false,
    };
    // SAFETY: per the contract.
    unsafe { read(lease, false, f) }
}

/// The number of nodes in the lease's acquisition report (0 for NULL or an invalid handle).
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_node_count(lease: *const redlock_lease) -> usize {
    // SAFETY: per the contract.
    unsafe { read(lease, 0, |l| l.inner.acquisition().nodes.len()) }
}

/// How many nodes had granted the lock when the acquisition was decided (at least the
/// quorum; 0 for NULL or an invalid handle). Nodes that answered after the decision count as
/// PENDING, not here.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_granted(lease: *const redlock_lease) -> usize {
    // SAFETY: per the contract.
    unsafe { read(lease, 0, |l| l.inner.acquisition().successes) }
}

/// Copies each node's acquisition outcome, in configuration order, into `out[0..cap)` and
/// returns the number of nodes (which may exceed `cap`; call with `cap` = 0 to size the
/// array). `out` may be NULL when `cap` is 0. Returns 0 for a NULL or invalid lease.
///
/// # Safety
/// `lease` must be NULL or a live lease; `out` must have room for `cap` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_node_outcomes(
    lease: *const redlock_lease,
    out: *mut redlock_node_outcome,
    cap: usize,
) -> usize {
    let f = |l: &redlock_lease| {
        let nodes = &l.inner.acquisition().nodes;
        if !out.is_null() {
            for (i, n) in nodes.iter().take(cap).enumerate() {
                // SAFETY: i < cap and `out` has room for `cap` elements per the contract.
                unsafe { *out.add(i) = (&n.outcome).into() };
            }
        }
        nodes.len()
    };
    // SAFETY: per the contract.
    unsafe { read(lease, 0, f) }
}

/// Frees a lease. NULL is a no-op, and so is a lease found freed already (best effort: see
/// `REDLOCK_STATUS_INVALID_HANDLE`). Does **not** unlock: an unreleased lock expires after its
/// TTL. Stops auto-renewal (waiting for a renewal round or an `on_lost` callback in flight,
/// unless called from that callback). No network I/O.
///
/// # Safety
/// `lease` must be NULL or a lease not yet freed, with no other call on it in progress.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_free(lease: *mut redlock_lease) {
    guard_or((), || {
        // SAFETY: from Box::into_raw in `acquire`, freed at most once per the contract; a
        // second free is detected (best effort) by `take`.
        let Some(l) = (unsafe { take(lease) }) else {
            return;
        };
        // An `on_lost` callback in flight may still use the handle: the magic stays valid
        // until it has returned, and is overwritten only by `release`.
        l.gate.close();
        l.inner.stop_renewal();
        release(l);
    });
}

/// The callback `redlock_lease_auto_renew` runs, once, on the manager's renewal thread when
/// the lease is lost: renewal could not confirm a quorum before the validity ran out, a quorum
/// reported another owner, or the renewal bound was reached. By then
/// `redlock_lease_is_lost(lease)` is true and `redlock_lease_validity_ms(lease)` is 0.
///
/// It may call any `redlock_lease_*` function on `lease` (including `redlock_unlock` and
/// `redlock_lease_free`) and any function on other handles, but should return quickly: other
/// leases' renewals wait for it. It must not unwind (no C++ exceptions or longjmp out of it).
pub type redlock_lost_fn =
    Option<unsafe extern "C" fn(lease: *mut redlock_lease, userdata: *mut c_void)>;

/// Turns on auto-renewal for `lease`: the manager's renewal thread (one per manager) extends
/// the lock to its TTL whenever a third of it has passed, batching renewals that fall due
/// together, and restores the key on a node that lost it while the lease is valid. It never
/// recreates an expired or released lock.
///
/// Renewal is bounded by `max_hold_ms` from the acquisition (0 means the default, one hour) and
/// by `max_extensions` automatic extensions (0 means no limit besides the hold time). When a
/// renewal cannot be confirmed before the validity ends, or a bound is reached, the lease is
/// marked lost shortly *before* its validity ends: `redlock_lease_is_lost` turns true,
/// the validity reads 0 for good, and `on_lost` (may be NULL) runs with `userdata`. Unlocking
/// stops renewal first and waits for a renewal in flight; freeing the lease stops it too.
/// Calling this again replaces the settings.
///
/// Statuses: OK, NOT_HELD (unlocked, lost or expired), NULL_ARGUMENT, INVALID_HANDLE, INTERNAL
/// (the renewal thread could not be started).
///
/// # Safety
/// `lease` must be a live lease; `userdata` is passed through untouched; `err` NULL or
/// `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_auto_renew(
    lease: *mut redlock_lease,
    max_hold_ms: u32,
    max_extensions: u32,
    on_lost: redlock_lost_fn,
    userdata: *mut c_void,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    // SAFETY: the same contract.
    unsafe {
        redlock_lease_auto_renew64(
            lease,
            max_hold_ms.into(),
            max_extensions,
            on_lost,
            userdata,
            err,
            err_len,
        )
    }
}

/// `redlock_lease_auto_renew` with a 64-bit hold bound, for holds past `UINT32_MAX` ms (about
/// 49.7 days): a leadership, say. `UINT64_MAX` holds for as long as the lease lives (no bound
/// but `max_extensions`); 0 still means the default, one hour.
///
/// Statuses: as `redlock_lease_auto_renew`.
///
/// # Safety
/// As `redlock_lease_auto_renew`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_auto_renew64(
    lease: *mut redlock_lease,
    max_hold_ms: u64,
    max_extensions: u32,
    on_lost: redlock_lost_fn,
    userdata: *mut c_void,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = |l: &redlock_lease| {
        let mut opts = renew_options(max_hold_ms, max_extensions);
        if let Some(f) = on_lost {
            let gate = Arc::clone(&l.gate);
            // Raw pointers are not Send; the gate guarantees the handle outlives each call.
            let handle = lease as usize;
            let data = userdata as usize;
            opts = opts.on_lost(move |_| {
                gate.run(|| {
                    // SAFETY: the gate runs this only while the handle is not freed, and the
                    // caller promised `f` is a valid function taking these arguments.
                    unsafe { f(handle as *mut redlock_lease, data as *mut c_void) }
                });
            });
        }
        Ok(l.inner.auto_renew(opts)?)
    };
    // SAFETY: per the contract.
    unsafe { with_lease(lease, err, err_len, f) }
}

/// Stops auto-renewal without unlocking (waiting for a renewal in flight). No effect when
/// renewal is off or `lease` is NULL or invalid.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_stop_renewal(lease: *mut redlock_lease) {
    // SAFETY: per the contract.
    unsafe { read(lease, (), |l| l.inner.stop_renewal()) }
}

/// True once the lease is known lost (auto-renewal failed or reached its bound). A lost lease
/// never becomes valid again. False for NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_is_lost(lease: *const redlock_lease) -> bool {
    // SAFETY: per the contract.
    unsafe { read(lease, false, |l| l.inner.is_lost()) }
}

/// Blocks while auto-renewal is on, until the lease is lost or `timeout_ms` pass. Returns
/// true if lost; false on timeout, and as soon as renewal stops otherwise (never started,
/// `redlock_lease_stop_renewal`, `redlock_unlock`). False for NULL or an invalid handle.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_wait_lost(
    lease: *const redlock_lease,
    timeout_ms: u32,
) -> bool {
    let timeout = Duration::from_millis(timeout_ms.into());
    // SAFETY: per the contract.
    unsafe { read(lease, false, |l| l.inner.wait_lost(timeout)) }
}
