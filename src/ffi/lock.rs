//! `redlock_manager` and `redlock_lease`.

use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use super::{FfiError, bytes, guard, guard_or, redlock_config, redlock_status};
use crate::error::NodeOutcome;
use crate::lock::{Lease, Redlock, Wait};
use crate::renew::RenewOptions;

/// A lock manager over N independent Redis masters.
///
/// Thread-safe: any number of threads may call `redlock_lock` and friends on one manager at
/// once. Created by `redlock_manager_new`, freed by `redlock_manager_free`; leases it made stay
/// usable after it is freed (each keeps what it needs alive). Not usable in a child process
/// after `fork()`.
///
/// Methods: `redlock_manager_new`, `redlock_manager_free`, `redlock_manager_node_count`,
/// `redlock_manager_quorum`, `redlock_lock`, `redlock_try_lock`, `redlock_lock_wait`,
/// `redlock_lock_opts`, `redlock_manager_node_state`, `redlock_manager_metrics`.
pub struct redlock_manager {
    inner: Redlock,
}

/// A held lock (named lease because the function `redlock_lock` takes the name).
///
/// Calls on one lease from several threads are serialised internally; only
/// `redlock_lease_free` must not race with other calls on the same lease. Freeing a lease does
/// not unlock it (the lock then expires after its TTL). Handles must not be used in a child
/// process after `fork()`: they share the parent's sockets, and the renewal thread does not
/// survive the fork.
///
/// Methods: `redlock_unlock`, `redlock_extend`, `redlock_lease_validity_ms`,
/// `redlock_lease_is_valid`, `redlock_lease_token`, `redlock_lease_resource`,
/// `redlock_lease_node_count`, `redlock_lease_granted`, `redlock_lease_node_outcomes`,
/// `redlock_lease_auto_renew`, `redlock_lease_stop_renewal`, `redlock_lease_is_renewing`,
/// `redlock_lease_is_lost`, `redlock_lease_wait_lost`, `redlock_lease_lost_reason`,
/// `redlock_lease_ttl_ms`, `redlock_lease_fencing_token`, `redlock_lease_free`.
pub struct redlock_lease {
    inner: Lease,
    token: CString,
    /// Keeps an `on_lost` callback from running with this handle once it is freed.
    gate: Arc<CallbackGate>,
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
    /// The node answered with an error (`-ERR`, `-WRONGPASS`, …).
    REDLOCK_NODE_SERVER_ERROR = 6,
    /// The node's answer was not valid RESP or not the expected reply.
    REDLOCK_NODE_PROTOCOL = 7,
    /// Not counted: the node restarted less than the maximum TTL ago (restart quarantine).
    REDLOCK_NODE_QUARANTINED = 8,
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
            NodeOutcome::ServerError(_) => REDLOCK_NODE_SERVER_ERROR,
            NodeOutcome::Protocol(_) => REDLOCK_NODE_PROTOCOL,
            NodeOutcome::Quarantined { .. } => REDLOCK_NODE_QUARANTINED,
        }
    }
}

/// Creates a manager from `cfg` (copied: `cfg` may be freed or changed afterwards). Validates
/// every option and resolves every host; no connection is made until the first lock.
///
/// Statuses: OK (`*out` receives the manager), NULL_ARGUMENT (`cfg`, `out`), INVALID_ARGUMENT
/// (no nodes, a node listed twice, a host that does not resolve, …). `*out` is written only
/// on success.
///
/// # Safety
/// `cfg` must be a live config; `out` a writable pointer; `err` NULL or `err_len` writable
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_new(
    cfg: *const redlock_config,
    out: *mut *mut redlock_manager,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    guard(err, err_len, || {
        if cfg.is_null() {
            return Err(FfiError::null("cfg"));
        }
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        // SAFETY: non-NULL, a live config per the contract; only read.
        let config = unsafe { (*cfg).inner.clone() };
        let mgr = Redlock::new(config)?;
        let raw = Box::into_raw(Box::new(redlock_manager { inner: mgr }));
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { *out = raw };
        Ok(())
    })
}

/// Frees a manager and closes its idle connections. NULL is a no-op. Never unlocks anything;
/// leases made by this manager remain usable and must still be freed.
///
/// # Safety
/// `mgr` must be NULL or a manager not yet freed, with no call on it in progress.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_free(mgr: *mut redlock_manager) {
    if mgr.is_null() {
        return;
    }
    guard_or((), || {
        // SAFETY: from Box::into_raw in redlock_manager_new, freed at most once.
        drop(unsafe { Box::from_raw(mgr) });
    });
}

/// The number of nodes (0 for NULL).
///
/// # Safety
/// `mgr` must be NULL or a live manager.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_node_count(mgr: *const redlock_manager) -> usize {
    // SAFETY: NULL or live per the contract.
    guard_or(0, || {
        unsafe { mgr.as_ref() }.map_or(0, |m| m.inner.node_count())
    })
}

/// The number of nodes that must agree, N / 2 + 1 (0 for NULL).
///
/// # Safety
/// `mgr` must be NULL or a live manager.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_quorum(mgr: *const redlock_manager) -> usize {
    // SAFETY: NULL or live per the contract.
    guard_or(0, || {
        unsafe { mgr.as_ref() }.map_or(0, |m| m.inner.quorum())
    })
}

/// The arguments common to the acquisition functions.
struct Acquire {
    mgr: *mut redlock_manager,
    resource: *const u8,
    resource_len: usize,
    ttl_ms: u32,
    wait: WaitMode,
    fenced: bool,
}

/// What the manager knows of node `index` (from 0, in configuration order): `*quarantined`
/// receives whether it is in restart quarantine, and `*remaining_ms` how much longer (0 when
/// not). Either out-pointer may be NULL; both are written only on success.
///
/// Statuses: OK, NULL_ARGUMENT (`mgr`), INVALID_ARGUMENT (`index` out of range).
///
/// # Safety
/// `mgr` must be a live manager; the out-pointers NULL or writable; `err` NULL or `err_len`
/// writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_node_state(
    mgr: *const redlock_manager,
    index: usize,
    quarantined: *mut bool,
    remaining_ms: *mut u32,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    guard(err, err_len, || {
        // SAFETY: NULL or a live manager per the contract.
        let Some(m) = (unsafe { mgr.as_ref() }) else {
            return Err(FfiError::null("mgr"));
        };
        let states = m.inner.node_states();
        let Some(st) = states.get(index) else {
            return Err(FfiError::invalid(format!(
                "node index {index} out of range ({} nodes)",
                states.len()
            )));
        };
        let remaining = st
            .quarantined_for
            .map_or(0, |d| d.as_millis().clamp(1, u32::MAX as u128) as u32);
        // SAFETY: each pointer is NULL (skipped) or writable per the contract.
        unsafe {
            if !quarantined.is_null() {
                *quarantined = st.quarantined_for.is_some();
            }
            if !remaining_ms.is_null() {
                *remaining_ms = remaining;
            }
        }
        Ok(())
    })
}

/// Writes the manager's metrics in the Prometheus text exposition format into `buf`, like
/// `snprintf`: at most `len - 1` bytes and a NUL (nothing when `buf` is NULL or `len` is 0),
/// and returns the length of the whole text, so a return value `>= len` means it was cut
/// short (call again with a buffer of at least the return value + 1). Returns 0 for NULL.
///
/// Counters and histograms: acquisitions by result, attempts and retries, wait and hold
/// times, unlock and extend outcomes, renewals, keys restored, lost leases, quarantined
/// nodes, and per node requests, errors by kind and latency. Every name starts `redlock_`;
/// node addresses never include a password.
///
/// # Safety
/// `mgr` must be NULL or a live manager; `buf` NULL or `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_metrics(
    mgr: *const redlock_manager,
    buf: *mut c_char,
    len: usize,
) -> usize {
    guard_or(0, || {
        // SAFETY: NULL or a live manager per the contract.
        let Some(m) = (unsafe { mgr.as_ref() }) else {
            return 0;
        };
        let text = m.inner.metrics().to_prometheus();
        if !buf.is_null() && len > 0 {
            // The text is ASCII apart from label values, which write_str cuts only at
            // character boundaries.
            super::write_str(buf, len, &text);
        }
        text.len()
    })
}

#[derive(Clone, Copy)]
enum WaitMode {
    Retry,
    Once,
    For(u32),
}

fn acquire(
    a: Acquire,
    out: *mut *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    guard(err, err_len, || {
        // SAFETY: NULL or a live manager per the contract; shared access is thread-safe.
        let Some(m) = (unsafe { a.mgr.as_ref() }) else {
            return Err(FfiError::null("mgr"));
        };
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        // SAFETY: `resource` points to `resource_len` readable bytes per the contract.
        let res = unsafe { bytes(a.resource, a.resource_len, "resource") }?;
        let ttl = Duration::from_millis(a.ttl_ms.into());
        let wait = match a.wait {
            WaitMode::Retry => Wait::Retries,
            WaitMode::Once => Wait::Once,
            WaitMode::For(ms) => Wait::Until(Instant::now() + Duration::from_millis(ms.into())),
        };
        let lease = m.inner.acquire(res, ttl, wait, a.fenced)?;
        let token = CString::new(lease.token()).map_err(|_| FfiError::invalid("token"))?;
        let raw = Box::into_raw(Box::new(redlock_lease {
            inner: lease,
            token,
            gate: Arc::default(),
        }));
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { *out = raw };
        Ok(())
    })
}

/// Acquires `resource` for `ttl_ms`, retrying as configured (`redlock_config_set_retry`).
/// Blocks for at most about `(retry_count + 1) × (node timeout + retry_delay_ms)`; never
/// forever.
///
/// The resource is 1 to `REDLOCK_MAX_RESOURCE_LEN` arbitrary bytes (NUL, CR/LF and invalid
/// UTF-8 are fine); `(NULL, 0)` is the empty name and is rejected. `ttl_ms` must exceed its
/// own drift allowance (`ttl_ms × factor + 2`), so 0..2 are rejected.
///
/// Statuses: OK (`*out` receives a lease to free with `redlock_lease_free`), NOT_ACQUIRED,
/// UNAVAILABLE, INVALID_ARGUMENT, NULL_ARGUMENT (`mgr`, `out`, or `resource` with a non-zero
/// length), INTERNAL. `*out` is written only on success; `err` names each node's outcome.
///
/// # Safety
/// `mgr` must be a live manager; `resource` must point to `resource_len` readable bytes;
/// `out` must be writable; `err` NULL or `err_len` writable bytes.
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
    let a = Acquire {
        mgr,
        resource,
        resource_len,
        ttl_ms,
        wait: WaitMode::Retry,
        fenced: false,
    };
    acquire(a, out, err, err_len)
}

/// One attempt to acquire `resource` for `ttl_ms`, with no retry. Same arguments and
/// statuses as `redlock_lock`.
///
/// # Safety
/// As for `redlock_lock`.
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
    let a = Acquire {
        mgr,
        resource,
        resource_len,
        ttl_ms,
        wait: WaitMode::Once,
        fenced: false,
    };
    acquire(a, out, err, err_len)
}

/// Acquires `resource` for `ttl_ms`, retrying after random pauses (up to the retry delay)
/// until `wait_ms` have passed; no attempt starts after that. The retry count does not apply.
/// Same statuses as `redlock_lock`.
///
/// # Safety
/// As for `redlock_lock`.
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
    let a = Acquire {
        mgr,
        resource,
        resource_len,
        ttl_ms,
        wait: WaitMode::For(wait_ms),
        fenced: false,
    };
    acquire(a, out, err, err_len)
}

/// Flag for `redlock_lock_opts`: grant a fencing token (`redlock_lease_fencing_token`).
pub const REDLOCK_LOCK_FENCED: u32 = 1;
/// Flag for `redlock_lock_opts`: one attempt, no retry (like `redlock_try_lock`).
pub const REDLOCK_LOCK_ONCE: u32 = 2;
/// Flag for `redlock_lock_opts`: retry until `wait_ms` have passed (like `redlock_lock_wait`).
pub const REDLOCK_LOCK_WAIT: u32 = 4;

/// Acquires `resource` for `ttl_ms` with options given as flags:
///
/// * `REDLOCK_LOCK_FENCED`: the lease carries a fencing token, strictly greater than that of
///   every earlier fenced grant of the resource (while a majority of nodes keeps its data).
///   Costs a second round trip: the token is read from the granting quorum's counters
///   (`redlock-fence:<resource>`, which never expire) and written back before the grant counts.
/// * `REDLOCK_LOCK_ONCE`: one attempt; `REDLOCK_LOCK_WAIT`: retry until `wait_ms`; neither:
///   retry as configured. ONCE and WAIT together are INVALID_ARGUMENT, as are unknown flags.
///
/// Statuses and arguments otherwise as for `redlock_lock`.
///
/// # Safety
/// As for `redlock_lock`.
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
    let wait = match (
        flags & REDLOCK_LOCK_ONCE != 0,
        flags & REDLOCK_LOCK_WAIT != 0,
    ) {
        _ if flags & !known != 0 => {
            return guard(err, err_len, || {
                Err(FfiError::invalid(format!(
                    "unknown flags {:#x}",
                    flags & !known
                )))
            });
        }
        (true, true) => {
            return guard(err, err_len, || {
                Err(FfiError::invalid(
                    "REDLOCK_LOCK_ONCE and REDLOCK_LOCK_WAIT are exclusive",
                ))
            });
        }
        (true, false) => WaitMode::Once,
        (false, true) => WaitMode::For(wait_ms),
        (false, false) => WaitMode::Retry,
    };
    let a = Acquire {
        mgr,
        resource,
        resource_len,
        ttl_ms,
        wait,
        fenced: flags & REDLOCK_LOCK_FENCED != 0,
    };
    acquire(a, out, err, err_len)
}

/// The lease's fencing token (see `REDLOCK_LOCK_FENCED`); 0 for a lease taken without it, and
/// for NULL. Exact up to 2^53.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_fencing_token(lease: *const redlock_lease) -> u64 {
    guard_or(0, || {
        lease_ref(lease).map_or(0, |l| l.inner.fencing_token().unwrap_or(0))
    })
}

/// True while auto-renewal is on for the lease (started, not stopped, unlocked, lost or at
/// its bound). Never waits (nor does `redlock_lease_is_lost`). False for NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_is_renewing(lease: *const redlock_lease) -> bool {
    guard_or(false, || {
        lease_ref(lease).is_some_and(|l| l.inner.is_renewing())
    })
}

/// Why the lease was lost, snprintf-style: if it is lost, writes at most `len - 1` bytes of
/// the reason and a NUL into `buf` (nothing when `buf` is NULL or `len` is 0), for example
/// `maximum hold time reached after 3000 ms` or `renewal failed: 1/5 extended (quorum 3);
/// node 2 (…): connection refused; …`, and returns the reason's full length (so a return
/// value `>= len` means it was cut short). Returns 0, writing nothing, if the lease is not lost
/// (or NULL).
///
/// # Safety
/// `lease` must be NULL or a live lease; `buf` NULL or `len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_lost_reason(
    lease: *const redlock_lease,
    buf: *mut c_char,
    len: usize,
) -> usize {
    guard_or(0, || {
        let Some(reason) = lease_ref(lease).and_then(|l| l.inner.lost_reason()) else {
            return 0;
        };
        let text = reason.to_string();
        super::write_str(buf, len, &text);
        text.len()
    })
}

/// The TTL of the lease's last successful acquisition or extension, in milliseconds (0 for
/// NULL).
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_ttl_ms(lease: *const redlock_lease) -> u32 {
    guard_or(0, || {
        lease_ref(lease).map_or(0, |l| {
            l.inner.ttl().as_millis().min(u32::MAX as u128) as u32
        })
    })
}

/// Runs `f` on the lease behind `lease`.
fn with_lease(
    lease: *const redlock_lease,
    err: *mut c_char,
    err_len: usize,
    f: impl FnOnce(&Lease) -> Result<(), FfiError>,
) -> redlock_status {
    guard(err, err_len, || {
        // SAFETY: NULL or a live lease per the contract; Lease methods take &self and
        // serialise internally.
        let Some(l) = (unsafe { lease.as_ref() }) else {
            return Err(FfiError::null("lease"));
        };
        f(&l.inner)
    })
}

/// Extends the lock to `ttl_ms` from now, if a quorum confirms before the current validity
/// ends. Never recreates an expired key; refuses (NOT_HELD, nothing sent) a lease whose
/// validity already ended or that was unlocked.
///
/// Statuses: OK, NOT_HELD, UNAVAILABLE, INVALID_ARGUMENT (TTL), NULL_ARGUMENT, INTERNAL.
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
    with_lease(lease, err, err_len, |l| {
        Ok(l.extend(Duration::from_millis(ttl_ms.into()))?)
    })
}

/// Releases the lock on every node (owner-checked: never deletes another owner's key). Does
/// not free the lease. From this call on the lease's validity reads 0.
///
/// Statuses: OK, NOT_HELD (expired, already unlocked, or not confirmed by a quorum),
/// UNAVAILABLE, NULL_ARGUMENT, INTERNAL. A second unlock returns NOT_HELD at once.
///
/// # Safety
/// `lease` must be a live lease; `err` NULL or `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_unlock(
    lease: *mut redlock_lease,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    with_lease(lease, err, err_len, |l| Ok(l.unlock()?))
}

fn lease_ref<'a>(lease: *const redlock_lease) -> Option<&'a redlock_lease> {
    // SAFETY: every caller's contract requires NULL or a live lease.
    unsafe { lease.as_ref() }
}

/// The remaining validity in milliseconds (rounded down): 0 once expired, unlocked or NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_validity_ms(lease: *const redlock_lease) -> u32 {
    guard_or(0, || {
        lease_ref(lease).map_or(0, |l| {
            l.inner.validity().as_millis().min(u32::MAX as u128) as u32
        })
    })
}

/// True while the remaining validity is positive (false for NULL).
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_is_valid(lease: *const redlock_lease) -> bool {
    guard_or(false, || {
        lease_ref(lease).is_some_and(|l| l.inner.is_valid())
    })
}

/// The lease's token: 40 hex characters, NUL-terminated, owned by the lease (valid until
/// `redlock_lease_free`). NULL for NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_token(lease: *const redlock_lease) -> *const c_char {
    guard_or(std::ptr::null(), || {
        lease_ref(lease).map_or(std::ptr::null(), |l| l.token.as_ptr())
    })
}

/// The resource name: `*len` receives its length (if `len` is not NULL); the bytes are owned
/// by the lease and are not NUL-terminated. NULL for NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease; `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_resource(
    lease: *const redlock_lease,
    len: *mut usize,
) -> *const u8 {
    guard_or(std::ptr::null(), || match lease_ref(lease) {
        None => std::ptr::null(),
        Some(l) => {
            let r = l.inner.resource();
            if !len.is_null() {
                // SAFETY: non-NULL and writable per the contract.
                unsafe { *len = r.len() };
            }
            r.as_ptr()
        }
    })
}

/// The number of nodes in the lease's acquisition report (0 for NULL).
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_node_count(lease: *const redlock_lease) -> usize {
    guard_or(0, || {
        lease_ref(lease).map_or(0, |l| l.inner.acquisition().nodes.len())
    })
}

/// How many nodes had granted the lock when the acquisition was decided (at least the
/// quorum; 0 for NULL). Nodes that answered after the decision count as PENDING, not here.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_granted(lease: *const redlock_lease) -> usize {
    guard_or(0, || {
        lease_ref(lease).map_or(0, |l| l.inner.acquisition().successes)
    })
}

/// Copies each node's acquisition outcome, in configuration order, into `out[0..cap)` and
/// returns the number of nodes (which may exceed `cap`; call with `cap` = 0 to size the
/// array). `out` may be NULL when `cap` is 0. Returns 0 for a NULL lease.
///
/// # Safety
/// `lease` must be NULL or a live lease; `out` must have room for `cap` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_node_outcomes(
    lease: *const redlock_lease,
    out: *mut redlock_node_outcome,
    cap: usize,
) -> usize {
    guard_or(0, || {
        let Some(l) = lease_ref(lease) else { return 0 };
        let nodes = &l.inner.acquisition().nodes;
        if !out.is_null() {
            for (i, n) in nodes.iter().take(cap).enumerate() {
                // SAFETY: i < cap and `out` has room for `cap` elements per the contract.
                unsafe { *out.add(i) = (&n.outcome).into() };
            }
        }
        nodes.len()
    })
}

/// Frees a lease. NULL is a no-op. Does **not** unlock: an unreleased lock expires after its
/// TTL. Stops auto-renewal (waiting for a renewal round or an `on_lost` callback in flight,
/// unless called from that callback). No network I/O.
///
/// # Safety
/// `lease` must be NULL or a lease not yet freed, with no other call on it in progress.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_free(lease: *mut redlock_lease) {
    if lease.is_null() {
        return;
    }
    guard_or((), || {
        // SAFETY: from Box::into_raw in `acquire`, freed at most once per the contract.
        let l = unsafe { Box::from_raw(lease) };
        l.gate.close();
        l.inner.stop_renewal();
        drop(l);
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
/// Statuses: OK, NOT_HELD (unlocked, lost or expired), NULL_ARGUMENT, INTERNAL (the renewal
/// thread could not be started).
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
    guard(err, err_len, || {
        // SAFETY: NULL or a live lease per the contract; only shared access.
        let Some(l) = (unsafe { lease.as_ref() }) else {
            return Err(FfiError::null("lease"));
        };
        let mut opts = RenewOptions::new();
        if max_hold_ms > 0 {
            opts = opts.max_hold(Duration::from_millis(max_hold_ms.into()));
        }
        if max_extensions > 0 {
            opts = opts.max_extensions(max_extensions);
        }
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
    })
}

/// Stops auto-renewal without unlocking (waiting for a renewal in flight). No effect when
/// renewal is off or `lease` is NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_stop_renewal(lease: *mut redlock_lease) {
    guard_or((), || {
        if let Some(l) = lease_ref(lease) {
            l.inner.stop_renewal();
        }
    })
}

/// True once the lease is known lost (auto-renewal failed or reached its bound). A lost lease
/// never becomes valid again. False for NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_is_lost(lease: *const redlock_lease) -> bool {
    guard_or(false, || {
        lease_ref(lease).is_some_and(|l| l.inner.is_lost())
    })
}

/// Blocks while auto-renewal is on, until the lease is lost or `timeout_ms` pass. Returns
/// true if lost; false on timeout, and as soon as renewal stops otherwise (never started,
/// `redlock_lease_stop_renewal`, `redlock_unlock`). False for NULL.
///
/// # Safety
/// `lease` must be NULL or a live lease.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_lease_wait_lost(
    lease: *const redlock_lease,
    timeout_ms: u32,
) -> bool {
    guard_or(false, || {
        lease_ref(lease)
            .is_some_and(|l| l.inner.wait_lost(Duration::from_millis(timeout_ms.into())))
    })
}
