//! `redlock_manager`: creation, introspection and metrics.

use std::ffi::c_char;

use super::{
    FfiError, guard, guard_or, handle, live, live_or_none, redlock_config, redlock_status, release,
    take, write_str,
};
use crate::{QuarantineReason, Redlock};

/// A lock manager over N independent Redis masters.
///
/// Thread-safe: any number of threads may call `redlock_acquire` and friends on one manager at
/// once. Created by `redlock_manager_new`, freed by `redlock_manager_free`; leases it made stay
/// usable after it is freed (each keeps what it needs alive). Once it and its leases are freed,
/// a connection that still owes replies (a slower node's) is read to the end by a background
/// thread before it closes, the stale limit at most: a release that returned at quorum still
/// reaches the slower nodes. Not usable in a child process after `fork()`.
///
/// Methods: `redlock_manager_new`, `redlock_manager_free`, `redlock_manager_node_count`,
/// `redlock_manager_quorum`, `redlock_acquire`, `redlock_lock`, `redlock_try_lock`,
/// `redlock_lock_wait`, `redlock_lock_opts`, `redlock_manager_node_state`,
/// `redlock_manager_node_quarantine_reason`, `redlock_manager_metrics`.
pub struct redlock_manager {
    /// `Handle::MAGIC` while live (see `super::Handle`).
    magic: u64,
    pub(crate) inner: Redlock,
}

handle!(redlock_manager, b"RLKMANGR");

/// The manager behind `mgr`: NULL_ARGUMENT for NULL, INVALID_HANDLE for a handle found freed or
/// forged (best effort).
///
/// # Safety
/// `mgr` must be NULL or a live manager (shared access is thread-safe).
pub(crate) unsafe fn manager_ref<'a>(mgr: *const redlock_manager) -> Result<&'a Redlock, FfiError> {
    // SAFETY: NULL or live per this function's contract (checked, best effort).
    unsafe { live(mgr, "mgr") }.map(|m| &m.inner)
}

/// The manager behind `mgr`, or `None` for NULL or an invalid handle (best effort), for
/// functions that return a fallback.
///
/// # Safety
/// As for [`manager_ref`].
unsafe fn manager_or_none<'a>(mgr: *const redlock_manager) -> Option<&'a Redlock> {
    // SAFETY: NULL or live per this function's contract (checked, best effort).
    unsafe { live_or_none(mgr) }.map(|m| &m.inner)
}

/// Creates a manager from `cfg` (copied: `cfg` may be freed or changed afterwards). Validates
/// every option and resolves every host; no connection is made until the first lock.
///
/// Statuses: OK (`*out` receives the manager), NULL_ARGUMENT (`cfg`, `out`), INVALID_HANDLE
/// (`cfg`), INVALID_ARGUMENT
/// (no nodes, a node listed twice, a host that does not resolve, a TLS file that cannot be
/// read or is not the PEM it should be, …). `*out` is written only on success. With TLS
/// verification off (`redlock_config_set_tls_insecure_skip_verify`) and a `rediss://` node, a
/// warning is written to stderr.
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
    let f = || {
        // SAFETY: NULL or a live config per the contract (checked, best effort); only read.
        let cfg = unsafe { live(cfg, "cfg") }?;
        if out.is_null() {
            return Err(FfiError::null("out"));
        }
        let config = cfg.inner.clone();
        let insecure = config.tls_options().skips_verification()
            && config
                .node_urls()
                .iter()
                .any(|u| u.starts_with("rediss://"));
        let mgr = Redlock::new(config)?;
        if insecure {
            // A C, Python or Go host has no `log` logger: the warning goes to stderr itself.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "redlock: WARNING: TLS certificate verification is OFF \
                 (redlock_config_set_tls_insecure_skip_verify): any node, or anyone on the path \
                 to it, is trusted; for tests only"
            );
        }
        let raw = Box::into_raw(Box::new(redlock_manager {
            magic: <redlock_manager as super::Handle>::MAGIC,
            inner: mgr,
        }));
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { *out = raw };
        Ok(())
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// Frees a manager and closes its connections once its last lease is freed too. NULL is a
/// no-op, and so is a handle found freed already (best effort: see
/// `REDLOCK_STATUS_INVALID_HANDLE`). Never unlocks anything; leases made by this manager remain
/// usable and must still be freed.
///
/// # Safety
/// `mgr` must be NULL or a manager not yet freed, with no call on it in progress.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_free(mgr: *mut redlock_manager) {
    guard_or((), || {
        // SAFETY: from Box::into_raw in redlock_manager_new, freed at most once per the
        // contract; a second free is detected (best effort) by `take`.
        if let Some(b) = unsafe { take(mgr) } {
            release(b);
        }
    });
}

/// The number of nodes (0 for NULL or an invalid handle).
///
/// # Safety
/// `mgr` must be NULL or a live manager.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_node_count(mgr: *const redlock_manager) -> usize {
    // SAFETY: NULL or live per the contract (checked, best effort).
    guard_or(0, || {
        unsafe { manager_or_none(mgr) }.map_or(0, |m| m.node_count())
    })
}

/// The number of nodes that must agree, N / 2 + 1 (0 for NULL or an invalid handle).
///
/// # Safety
/// `mgr` must be NULL or a live manager.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_quorum(mgr: *const redlock_manager) -> usize {
    // SAFETY: NULL or live per the contract (checked, best effort).
    guard_or(0, || {
        unsafe { manager_or_none(mgr) }.map_or(0, |m| m.quorum())
    })
}

/// What the manager knows of node `index` (from 0, in configuration order): `*quarantined`
/// receives whether it is in restart quarantine, and `*remaining_ms` how much longer at most
/// (0 when not; see `redlock_manager_node_quarantine_reason` for why). Either out-pointer may
/// be NULL; both are written only on success.
///
/// Statuses: OK, NULL_ARGUMENT (`mgr`), INVALID_HANDLE (`mgr`), INVALID_ARGUMENT (`index` out
/// of range).
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
    let f = || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let m = unsafe { manager_ref(mgr) }?;
        let states = m.node_states();
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
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// Trusts the nodes the operator **knows are new** (they never held a lock), so that they
/// count at once instead of after a restart quarantine: `nodes` holds `count` node indexes
/// (from 0, in configuration order). See `Redlock::admit_new_nodes`: a node quarantined for
/// a reason a new server can have (no marker; young in a cluster with no marker yet) is
/// trusted and its marker written, confirmed before this returns; a node quarantined for what
/// it did (a restart seen, a promotion, a stale marker) is refused. Admitting a node that did
/// hold a lock and lose it can grant that lock twice within its TTL.
///
/// Statuses: OK, NULL_ARGUMENT (`mgr`; `nodes` with `count` > 0), INVALID_HANDLE,
/// INVALID_ARGUMENT (an index out of range, a cluster node, restart quarantine off, a node
/// that is not new), UNAVAILABLE (a node did not answer, or its marker write was not
/// confirmed).
///
/// # Safety
/// `mgr` must be a live manager; `nodes` NULL or `count` readable `size_t`s; `err` NULL or
/// `err_len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_admit_new_nodes(
    mgr: *const redlock_manager,
    nodes: *const usize,
    count: usize,
    err: *mut c_char,
    err_len: usize,
) -> redlock_status {
    let f = || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let m = unsafe { manager_ref(mgr) }?;
        let indexes: &[usize] = if count == 0 {
            &[]
        } else if nodes.is_null() {
            return Err(FfiError::null("nodes"));
        } else {
            // SAFETY: non-NULL, and the caller guarantees `count` readable indexes.
            unsafe { std::slice::from_raw_parts(nodes, count) }
        };
        m.admit_new_nodes(indexes)?;
        Ok(())
    };
    // SAFETY: `err` per the contract.
    unsafe { guard(err, err_len, f) }
}

/// Why a node is in restart quarantine (`redlock_manager_node_quarantine_reason`). Stable
/// numbers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_quarantine_reason {
    /// Not in quarantine (or not heard from yet, or the arguments were invalid).
    REDLOCK_QUARANTINE_NONE = 0,
    /// No marker while other nodes have one, or the marker vanished: it restarted empty or its
    /// keyspace was flushed. Counted from when the loss was first seen.
    REDLOCK_QUARANTINE_NO_MARKER = 1,
    /// The marker holds another `run_id`: restarted from disk, or a replica promoted after a
    /// failover, possibly without the latest writes. Counted from when the manager first saw
    /// it so.
    REDLOCK_QUARANTINE_STALE_MARKER = 2,
    /// The manager saw its `run_id` change (a restart, or a failover behind the same
    /// address). Counted from when it saw the change.
    REDLOCK_QUARANTINE_RESTART_SEEN = 3,
    /// No node has a marker yet and this one has been up for less than the maximum TTL.
    REDLOCK_QUARANTINE_YOUNG = 4,
    /// No node has a marker yet and not every node has answered: a brand-new cluster is
    /// trusted once all have (or after the maximum TTL).
    REDLOCK_QUARANTINE_UNDECIDED = 5,
    /// The server was promoted (a replica made master) and may lack its old master's last
    /// writes.
    REDLOCK_QUARANTINE_PROMOTED = 6,
}

/// Why node `index` (from 0, in configuration order) is in restart quarantine, or
/// `REDLOCK_QUARANTINE_NONE` when it is not (and for a NULL or invalid manager handle, or an
/// index out of range).
///
/// # Safety
/// `mgr` must be NULL or a live manager.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn redlock_manager_node_quarantine_reason(
    mgr: *const redlock_manager,
    index: usize,
) -> redlock_quarantine_reason {
    use redlock_quarantine_reason::*;
    guard_or(REDLOCK_QUARANTINE_NONE, || {
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let reason = unsafe { manager_or_none(mgr) }
            .and_then(|m| m.node_states().get(index).and_then(|s| s.quarantine_reason));
        match reason {
            None => REDLOCK_QUARANTINE_NONE,
            Some(QuarantineReason::NoMarker) => REDLOCK_QUARANTINE_NO_MARKER,
            Some(QuarantineReason::StaleMarker) => REDLOCK_QUARANTINE_STALE_MARKER,
            Some(QuarantineReason::RestartSeen) => REDLOCK_QUARANTINE_RESTART_SEEN,
            Some(QuarantineReason::Young) => REDLOCK_QUARANTINE_YOUNG,
            Some(QuarantineReason::Undecided) => REDLOCK_QUARANTINE_UNDECIDED,
            Some(QuarantineReason::Promoted) => REDLOCK_QUARANTINE_PROMOTED,
        }
    })
}

/// Writes the manager's metrics in the Prometheus text exposition format into `buf`, like
/// `snprintf`: at most `len - 1` bytes and a NUL (nothing when `buf` is NULL or `len` is 0),
/// and returns the length of the whole text, so a return value `>= len` means it was cut
/// short (call again with a buffer of at least the return value + 1). Returns 0 for NULL or
/// an invalid handle.
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
        // SAFETY: NULL or a live manager per the contract (checked, best effort).
        let Some(m) = (unsafe { manager_or_none(mgr) }) else {
            return 0;
        };
        let text = m.metrics().to_prometheus();
        // The text is ASCII apart from label values, which write_str cuts only at character
        // boundaries. SAFETY: `buf` is NULL or `len` writable bytes per the contract.
        unsafe { write_str(buf, len, &text) };
        text.len()
    })
}
