//! The C ABI. Every `extern "C"` function lives under this module; `build.rs` turns their doc
//! comments into `include/redlock.h`.
//!
//! Conventions (also in docs/c-api.md, "C API conventions"):
//!
//! * Every fallible function returns a [`redlock_status`] and takes a caller-owned
//!   `char *err, size_t err_len`; on failure the buffer receives a NUL-terminated message,
//!   truncated to fit. Either may be NULL/0. On success it is not touched.
//! * Out-parameters are written only on success.
//! * Every pointer is checked: NULL gives `REDLOCK_STATUS_NULL_ARGUMENT`.
//! * Every handle carries a magic number, checked on entry and overwritten by its `*_free`: a
//!   handle found freed or forged gives `REDLOCK_STATUS_INVALID_HANDLE` (accessors return
//!   their NULL fallback; `*_free` ignores it). A best-effort diagnostic, not a guarantee.
//! * A panic inside the library becomes `REDLOCK_STATUS_PANIC`; it never unwinds into C.
//! * `*_free(NULL)` is a no-op; no `*_free` unlocks anything or waits on the network.
//! * Durations are milliseconds (`*_ms`), resources are `(const uint8_t *, size_t)`.
#![allow(unsafe_code)] // the C ABI: every unsafe block carries a SAFETY comment
#![allow(non_camel_case_types)] // C names: redlock_status, redlock_config, …

mod acquire;
mod cancel;
mod check;
mod config;
mod election;
mod holders;
mod lease;
mod manager;

pub use acquire::*;
pub use cancel::*;
pub use check::*;
pub use config::*;
pub use election::*;
pub use holders::*;
pub use lease::*;
pub use manager::*;

use std::any::Any;
use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::Error;

/// The result of every fallible function. The numbers are stable and never reused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redlock_status {
    /// Success.
    REDLOCK_STATUS_OK = 0,
    /// The lock is held elsewhere: too few nodes granted it for a quorum, or the grants came
    /// too late to leave any validity. Retrying later may succeed.
    REDLOCK_STATUS_NOT_ACQUIRED = 1,
    /// Unlock or extend could not confirm ownership on a quorum: the lock expired, was already
    /// unlocked, or was taken over. Assume it is no longer held.
    REDLOCK_STATUS_NOT_HELD = 2,
    /// Too many nodes failed (timeouts, refused connections, errors) for a quorum to be
    /// possible.
    REDLOCK_STATUS_UNAVAILABLE = 3,
    /// Like UNAVAILABLE, but the nodes that refused this client's credentials (a wrong
    /// password or user, a password missing, an ACL user without the needed permissions:
    /// `WRONGPASS`, `NOAUTH`, `NOPERM`) are what stands between the others and a quorum. The
    /// message names each node's outcome. Fix the node URLs or the ACLs.
    REDLOCK_STATUS_AUTH = 4,
    /// The acquisition was cancelled through its `redlock_cancel` handle (or the binding's
    /// equivalent: a Go context, Ctrl-C in Python). No key was left behind.
    REDLOCK_STATUS_CANCELLED = 5,
    /// Bad input: a malformed URL, a TTL out of range, an empty resource, … Nothing was sent.
    REDLOCK_STATUS_INVALID_ARGUMENT = 10,
    /// A required pointer was NULL.
    REDLOCK_STATUS_NULL_ARGUMENT = 11,
    /// A handle argument is not a live handle of its type: it was freed already (a
    /// use-after-free or a double free), or it never was one (a forged or mistyped pointer).
    /// Functions that return a value instead of a status return their NULL fallback for such a
    /// handle, and `*_free` ignores it.
    ///
    /// A best-effort diagnostic, not a guarantee: each handle carries a magic number that is
    /// checked on entry and overwritten when the handle is freed, but freed memory may have been
    /// reused (by a new handle of the same type, which then passes the check, or by anything
    /// else), and reading it is undefined behaviour that may still crash. Never rely on this
    /// status: a program that sees it has a bug to fix.
    REDLOCK_STATUS_INVALID_HANDLE = 12,
    /// An operating-system facility failed (random source, poll(2)).
    REDLOCK_STATUS_INTERNAL = 20,
    /// A bug: the library panicked. The panic was caught; the process is intact.
    REDLOCK_STATUS_PANIC = 99,
}

use redlock_status::*;

/// A failure on its way to C: a status and a message.
pub(crate) struct FfiError {
    status: redlock_status,
    msg: String,
}

impl FfiError {
    pub(crate) fn invalid(msg: impl Into<String>) -> FfiError {
        FfiError {
            status: REDLOCK_STATUS_INVALID_ARGUMENT,
            msg: msg.into(),
        }
    }

    /// An outcome that is not an error of the call but has its own status (no leader:
    /// NOT_HELD), with a message.
    pub(crate) fn with_status(status: redlock_status, msg: impl Into<String>) -> FfiError {
        FfiError {
            status,
            msg: msg.into(),
        }
    }

    pub(crate) fn null(what: &str) -> FfiError {
        FfiError {
            status: REDLOCK_STATUS_NULL_ARGUMENT,
            msg: format!("{what} is NULL"),
        }
    }

    pub(crate) fn invalid_handle(what: &str, ty: &str) -> FfiError {
        FfiError {
            status: REDLOCK_STATUS_INVALID_HANDLE,
            msg: format!("{what} is not a live {ty} (freed already, or not a {ty} handle)"),
        }
    }
}

/// A C handle: a boxed struct with a `magic: u64` field, set to [`Handle::MAGIC`] at creation
/// and overwritten with [`FREED_MAGIC`] by its `*_free`. [`live`] checks it on entry, so that
/// the common misuses (a use after free, a double free, a forged or mistyped pointer) give
/// `REDLOCK_STATUS_INVALID_HANDLE` rather than a crash: best effort, not a guarantee (see the
/// status's documentation).
pub(crate) trait Handle: Sized {
    /// The value of `magic` while the handle is live: distinct per type.
    const MAGIC: u64;
    /// The C type's name, for messages.
    const NAME: &'static str;

    /// The address of the `magic` field of the handle at `p`, computed without reading.
    ///
    /// # Safety
    /// `p` must be non-NULL and aligned; the address is only meaningful if it is a handle.
    unsafe fn magic_ptr(p: *mut Self) -> *mut u64;
}

/// Implements [`Handle`] for a struct with a `magic: u64` field.
macro_rules! handle {
    ($t:ident, $magic:literal) => {
        impl $crate::ffi::Handle for $t {
            const MAGIC: u64 = u64::from_be_bytes(*$magic);
            const NAME: &'static str = stringify!($t);

            unsafe fn magic_ptr(p: *mut Self) -> *mut u64 {
                // SAFETY: a field projection of a non-NULL, aligned pointer, per the contract;
                // `&raw mut` creates no reference and reads nothing.
                unsafe { &raw mut (*p).magic }
            }
        }
    };
}
pub(crate) use handle;

/// What `*_free` writes into `magic` before it frees the memory: the same for every type.
pub(crate) const FREED_MAGIC: u64 = u64::from_be_bytes(*b"RLKFREED");

/// Checks the handle at `p`: `Err` NULL_ARGUMENT for NULL and INVALID_HANDLE for a pointer
/// that is misaligned or whose magic is not `T::MAGIC`. Allocates nothing.
///
/// # Safety
/// `p` must be NULL or a live handle of type `T`. A freed or forged pointer breaks that
/// contract; reading its magic is then undefined behaviour, tolerated as a best-effort
/// diagnostic (the read is volatile so that the compiler keeps it, but the memory may have been
/// unmapped or reused).
unsafe fn check<T: Handle>(p: *mut T) -> Result<(), redlock_status> {
    if p.is_null() {
        return Err(REDLOCK_STATUS_NULL_ARGUMENT);
    }
    if !p.is_aligned() {
        return Err(REDLOCK_STATUS_INVALID_HANDLE);
    }
    // SAFETY: non-NULL and aligned; a live handle per the contract, and anything else is the
    // best-effort case described above. A volatile read cannot be elided or assumed.
    let magic = unsafe { std::ptr::read_volatile(T::magic_ptr(p)) };
    if magic != T::MAGIC {
        return Err(REDLOCK_STATUS_INVALID_HANDLE);
    }
    Ok(())
}

/// The error for a handle that [`check`] rejected with `status`.
fn handle_error<T: Handle>(status: redlock_status, what: &str) -> FfiError {
    match status {
        REDLOCK_STATUS_NULL_ARGUMENT => FfiError::null(what),
        _ => FfiError::invalid_handle(what, T::NAME),
    }
}

/// The handle at `p`, shared, after [`check`].
///
/// # Safety
/// As for [`check`], and the handle must stay live for `'a` with no `&mut` to it meanwhile.
pub(crate) unsafe fn live<'a, T: Handle>(p: *const T, what: &str) -> Result<&'a T, FfiError> {
    // SAFETY: per this function's contract.
    unsafe { check(p.cast_mut()) }.map_err(|st| handle_error::<T>(st, what))?;
    // SAFETY: checked non-NULL, aligned and live (best effort); shared access per the contract.
    Ok(unsafe { &*p })
}

/// The handle at `p`, shared, if [`check`] accepts it: for functions that return a fallback
/// rather than a status (allocates nothing, unlike [`live`]'s error).
///
/// # Safety
/// As for [`live`].
pub(crate) unsafe fn live_or_none<'a, T: Handle>(p: *const T) -> Option<&'a T> {
    // SAFETY: per this function's contract.
    unsafe { check(p.cast_mut()) }.ok()?;
    // SAFETY: checked non-NULL, aligned and live (best effort); shared access per the contract.
    Some(unsafe { &*p })
}

/// The handle at `p`, exclusive, after [`check`].
///
/// # Safety
/// As for [`check`], and the handle must stay live for `'a`, used by no one else meanwhile.
pub(crate) unsafe fn live_mut<'a, T: Handle>(p: *mut T, what: &str) -> Result<&'a mut T, FfiError> {
    // SAFETY: per this function's contract.
    unsafe { check(p) }.map_err(|st| handle_error::<T>(st, what))?;
    // SAFETY: checked non-NULL, aligned and live (best effort); exclusive per the contract.
    Ok(unsafe { &mut *p })
}

/// Takes back ownership of the handle at `p` for its `*_free`: `None` (nothing to free) for
/// NULL and for a handle that [`check`] rejects, such as one freed already.
///
/// # Safety
/// As for [`check`], and `p` must come from `Box::into_raw`, with no other call on it in
/// progress.
pub(crate) unsafe fn take<T: Handle>(p: *mut T) -> Option<Box<T>> {
    // SAFETY: per this function's contract.
    unsafe { check(p) }.ok()?;
    // SAFETY: a live handle from Box::into_raw, not in use elsewhere, per the contract.
    Some(unsafe { Box::from_raw(p) })
}

/// Frees a handle taken with [`take`], overwriting its magic first so that a later call with
/// the same pointer is detected (while the memory is not reused).
pub(crate) fn release<T: Handle>(mut b: Box<T>) {
    let p: *mut T = &mut *b;
    // SAFETY: `p` points to the live, aligned, boxed handle we own. The write is volatile so
    // that it is not dropped as a dead store before the deallocation.
    unsafe { std::ptr::write_volatile(T::magic_ptr(p), FREED_MAGIC) };
    drop(b);
}

impl From<Error> for FfiError {
    fn from(e: Error) -> FfiError {
        let status = match &e {
            Error::NotAcquired(_) => REDLOCK_STATUS_NOT_ACQUIRED,
            Error::NotHeld(_) => REDLOCK_STATUS_NOT_HELD,
            Error::Unavailable(_) => REDLOCK_STATUS_UNAVAILABLE,
            Error::Auth(_) => REDLOCK_STATUS_AUTH,
            Error::InvalidInput(_) => REDLOCK_STATUS_INVALID_ARGUMENT,
            Error::Internal(_) => REDLOCK_STATUS_INTERNAL,
            Error::Cancelled => REDLOCK_STATUS_CANCELLED,
        };
        FfiError {
            status,
            msg: e.to_string(),
        }
    }
}

/// Copies `msg` into the caller's buffer, truncated at a character boundary and
/// NUL-terminated. Does nothing when `buf` is NULL or `len` is 0.
///
/// # Safety
/// `buf` must be NULL or point to `len` writable bytes.
pub(crate) unsafe fn write_str(buf: *mut c_char, len: usize, msg: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let mut n = msg.len().min(len - 1);
    while !msg.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: the caller guarantees `buf` points to `len` writable bytes; we write `n + 1 <=
    // len` bytes, and the source is a distinct Rust string.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
}

fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs `f`, turning its error or a panic into a status and a message in `err`.
///
/// # Safety
/// `err` must be NULL or point to `err_len` writable bytes.
pub(crate) unsafe fn guard(
    err: *mut c_char,
    err_len: usize,
    f: impl FnOnce() -> Result<(), FfiError>,
) -> redlock_status {
    let (status, msg) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return REDLOCK_STATUS_OK,
        Ok(Err(e)) => (e.status, e.msg),
        Err(p) => (
            REDLOCK_STATUS_PANIC,
            format!("panic in redlock (a bug): {}", panic_text(&*p)),
        ),
    };
    // SAFETY: NULL or `err_len` writable bytes, per this function's contract.
    unsafe { write_str(err, err_len, &msg) };
    status
}

/// Runs `f`; a panic yields `fallback`.
pub(crate) fn guard_or<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Reads a `(ptr, len)` byte range; `(NULL, 0)` is the empty slice.
///
/// # Safety
/// `ptr` must point to `len` readable bytes that stay valid and unchanged for `'a`.
pub(crate) unsafe fn bytes<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
) -> Result<&'a [u8], FfiError> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(FfiError::null(what));
    }
    // SAFETY: non-NULL, and the caller guarantees `len` readable bytes for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Reads a NUL-terminated UTF-8 string.
///
/// # Safety
/// `ptr` must be NULL or point to a NUL-terminated string valid for `'a`.
pub(crate) unsafe fn c_str<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, FfiError> {
    if ptr.is_null() {
        return Err(FfiError::null(what));
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    let s = unsafe { std::ffi::CStr::from_ptr(ptr) };
    s.to_str()
        .map_err(|_| FfiError::invalid(format!("{what} is not valid UTF-8")))
}

/// A static, NUL-terminated description of a status ("ok", "not acquired", …). Never NULL;
/// `"unknown status"` for numbers that are not a `redlock_status`.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_status_str(status: i32) -> *const c_char {
    let s: &'static [u8] = match status {
        0 => b"ok\0",
        1 => b"not acquired\0",
        2 => b"not held\0",
        3 => b"unavailable\0",
        4 => b"authentication failed\0",
        5 => b"cancelled\0",
        10 => b"invalid argument\0",
        11 => b"null argument\0",
        12 => b"invalid handle\0",
        20 => b"internal error\0",
        99 => b"panic\0",
        _ => b"unknown status\0",
    };
    s.as_ptr().cast()
}

/// The library version, for example `"0.1.0"`: static, NUL-terminated, never NULL. Compare with
/// the `REDLOCK_VERSION_*` macros to detect a header/library mismatch.
#[unsafe(no_mangle)]
pub extern "C" fn redlock_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The largest TTL any lock may have, in milliseconds (`UINT32_MAX`, about 49.7 days).
pub const REDLOCK_MAX_TTL_MS: u32 = u32::MAX;

/// The default maximum TTL of a manager, in milliseconds (see `redlock_config_set_max_ttl`).
pub const REDLOCK_DEFAULT_MAX_TTL_MS: u32 = 60_000;
const _: () = assert!(REDLOCK_DEFAULT_MAX_TTL_MS as u128 == crate::DEFAULT_MAX_TTL.as_millis());

/// The longest resource name accepted, in bytes.
pub const REDLOCK_MAX_RESOURCE_LEN: usize = 1024;
const _: () = assert!(REDLOCK_MAX_RESOURCE_LEN == crate::MAX_RESOURCE_LEN);

/// The longest owner id of a reentrant lock (`redlock_acquire_opts_set_owner`), in bytes.
pub const REDLOCK_MAX_OWNER_LEN: usize = 512;
const _: () = assert!(REDLOCK_MAX_OWNER_LEN == crate::MAX_OWNER_LEN);

/// The most resources one `redlock_acquire_many` call may name.
pub const REDLOCK_MAX_RESOURCES: usize = 1000;
const _: () = assert!(REDLOCK_MAX_RESOURCES == crate::MAX_RESOURCES);

/// The most permits a semaphore may have (`redlock_semaphore_acquire`).
pub const REDLOCK_MAX_PERMITS: u32 = 1000;
const _: () = assert!(REDLOCK_MAX_PERMITS == crate::MAX_PERMITS);

/// The longest value a candidate may campaign or proclaim with (`redlock_campaign`,
/// `redlock_lease_proclaim`), in bytes.
pub const REDLOCK_MAX_LEADER_VALUE: usize = 65536;
const _: () = assert!(REDLOCK_MAX_LEADER_VALUE == crate::MAX_LEADER_VALUE);

/// A fair waiter's default drop-out time in milliseconds, when the lock's TTL is not shorter
/// (`redlock_acquire_opts_set_drop_out_ms`).
pub const REDLOCK_DEFAULT_DROP_OUT_MS: u32 = 5000;
const _: () = assert!(REDLOCK_DEFAULT_DROP_OUT_MS as u128 == crate::DEFAULT_DROP_OUT.as_millis());

/// The shortest drop-out time `redlock_acquire_opts_set_drop_out_ms` takes, in milliseconds.
pub const REDLOCK_MIN_DROP_OUT_MS: u32 = 20;
const _: () = assert!(REDLOCK_MIN_DROP_OUT_MS as u128 == crate::MIN_DROP_OUT.as_millis());

/// The longest drop-out time `redlock_acquire_opts_set_drop_out_ms` takes, in milliseconds.
pub const REDLOCK_MAX_DROP_OUT_MS: u32 = 3_600_000;
const _: () = assert!(REDLOCK_MAX_DROP_OUT_MS as u128 == crate::MAX_DROP_OUT.as_millis());

/// The longest holder label (`redlock_config_set_label`), in bytes.
pub const REDLOCK_MAX_LABEL_LEN: usize = 256;
const _: () = assert!(REDLOCK_MAX_LABEL_LEN == crate::MAX_LABEL_LEN);

/// The longest key prefix (`redlock_config_set_key_prefix`), in bytes.
pub const REDLOCK_MAX_KEY_PREFIX_LEN: usize = 256;
const _: () = assert!(REDLOCK_MAX_KEY_PREFIX_LEN == crate::MAX_KEY_PREFIX_LEN);

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn guard_turns_panics_and_errors_into_statuses() {
        let mut buf = [0 as c_char; 64];
        // SAFETY: a 64-byte buffer.
        let st = unsafe { guard(buf.as_mut_ptr(), buf.len(), || panic!("boom")) };
        assert_eq!(st, REDLOCK_STATUS_PANIC);
        // SAFETY: write_str NUL-terminated the buffer.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert!(msg.contains("boom"), "{msg}");
        // SAFETY: a 64-byte buffer.
        let st = unsafe { guard(buf.as_mut_ptr(), buf.len(), || Err(FfiError::null("cfg"))) };
        assert_eq!(st, REDLOCK_STATUS_NULL_ARGUMENT);
        assert_eq!(guard_or(7u32, || panic!("x")), 7);
    }

    #[test]
    fn messages_are_truncated_at_character_boundaries() {
        let mut buf = [1 as c_char; 5];
        // SAFETY: writes stay within the 5-byte buffer (or write nothing, for NULL).
        let s = unsafe {
            write_str(buf.as_mut_ptr(), buf.len(), "ab€cd");
            CStr::from_ptr(buf.as_ptr()).to_str().unwrap().to_string()
        };
        assert_eq!(s, "ab");
        // SAFETY: as above.
        unsafe {
            write_str(buf.as_mut_ptr(), 1, "xyz");
            assert_eq!(buf[0], 0);
            write_str(std::ptr::null_mut(), 10, "xyz");
        }
    }

    /// A zeroed (or otherwise filled) buffer big and aligned enough to pass for a `T`.
    fn forged<T>(fill: u64) -> Vec<u64> {
        assert!(align_of::<T>() <= align_of::<u64>());
        vec![fill; size_of::<T>().div_ceil(8)]
    }

    /// The status and message of a call that fills a 256-byte error buffer.
    fn call(f: impl FnOnce(*mut c_char, usize) -> redlock_status) -> (redlock_status, String) {
        let mut buf = [0 as c_char; 256];
        let st = f(buf.as_mut_ptr(), buf.len());
        // SAFETY: NUL-terminated: zeroed, and write_str NUL-terminates.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) };
        (st, msg.to_str().unwrap().to_string())
    }

    #[test]
    fn forged_handles_give_invalid_handle_and_fallbacks() {
        use std::ptr::{null, null_mut};
        const INVALID: redlock_status = REDLOCK_STATUS_INVALID_HANDLE;
        let r = b"r".as_ptr();
        // Zeroes, what `*_free` leaves behind, and garbage.
        for fill in [0, FREED_MAGIC, u64::MAX, 0x5a5a_5a5a_5a5a_5a5a] {
            let mut cfg_buf = forged::<redlock_config>(fill);
            let mut mgr_buf = forged::<redlock_manager>(fill);
            let mut opts_buf = forged::<redlock_acquire_opts>(fill);
            let mut cancel_buf = forged::<redlock_cancel>(fill);
            let mut lease_buf = forged::<redlock_lease>(fill);
            let cfg = cfg_buf.as_mut_ptr().cast::<redlock_config>();
            let mgr = mgr_buf.as_mut_ptr().cast::<redlock_manager>();
            let opts = opts_buf.as_mut_ptr().cast::<redlock_acquire_opts>();
            let cancel = cancel_buf.as_mut_ptr().cast::<redlock_cancel>();
            let lease = lease_buf.as_mut_ptr().cast::<redlock_lease>();
            let (mut out_mgr, mut out_lease) = (null_mut(), null_mut());
            // SAFETY: every pointer is NULL, a live handle, or a forged one that the magic
            // check rejects before anything else is read; error buffers are 256 bytes.
            unsafe {
                let (st, msg) = call(|e, n| redlock_config_add_node(cfg, c"h:1".as_ptr(), e, n));
                assert_eq!(st, INVALID, "{fill:#x}");
                assert_eq!(
                    msg,
                    "cfg is not a live redlock_config (freed already, or not a redlock_config \
                     handle)"
                );
                assert_eq!(
                    call(|e, n| redlock_config_set_retry(cfg, 1, 1, e, n)).0,
                    INVALID
                );
                let st = call(|e, n| redlock_config_set_drift_factor(cfg, 0.1, e, n)).0;
                assert_eq!(st, INVALID);
                assert_eq!(
                    call(|e, n| redlock_config_set_timeouts(cfg, 1, 1, e, n)).0,
                    INVALID
                );
                assert_eq!(
                    call(|e, n| redlock_config_set_max_ttl(cfg, 10, e, n)).0,
                    INVALID
                );
                let st = call(|e, n| redlock_config_set_restart_quarantine(cfg, false, e, n)).0;
                assert_eq!(st, INVALID);
                let (st, msg) = call(|e, n| redlock_manager_new(cfg, &mut out_mgr, e, n));
                assert_eq!((st, out_mgr), (INVALID, null_mut()));
                assert!(msg.starts_with("cfg is not a live redlock_config"), "{msg}");
                redlock_config_free(cfg);

                assert_eq!(redlock_manager_node_count(mgr), 0);
                assert_eq!(redlock_manager_quorum(mgr), 0);
                let st =
                    call(|e, n| redlock_manager_node_state(mgr, 0, null_mut(), null_mut(), e, n));
                assert_eq!(st.0, INVALID);
                assert!(
                    st.1.starts_with("mgr is not a live redlock_manager"),
                    "{}",
                    st.1
                );
                assert_eq!(
                    redlock_manager_node_quarantine_reason(mgr, 0),
                    redlock_quarantine_reason::REDLOCK_QUARANTINE_NONE
                );
                let mut text = [1 as c_char; 8];
                assert_eq!(
                    redlock_manager_metrics(mgr, text.as_mut_ptr(), text.len()),
                    0
                );
                assert_eq!(text, [1; 8], "nothing written");
                let lock = call(|e, n| redlock_lock(mgr, r, 1, 1000, &mut out_lease, e, n));
                assert_eq!(lock.0, INVALID);
                let st = call(|e, n| redlock_try_lock(mgr, r, 1, 1000, &mut out_lease, e, n)).0;
                assert_eq!(st, INVALID);
                let st = call(|e, n| redlock_lock_wait(mgr, r, 1, 1000, 5, &mut out_lease, e, n));
                assert_eq!(st.0, INVALID);
                let st =
                    call(|e, n| redlock_lock_opts(mgr, r, 1, 1000, 0, 0, &mut out_lease, e, n));
                assert_eq!(st.0, INVALID);
                let st =
                    call(|e, n| redlock_acquire(mgr, r, 1, 1000, null(), &mut out_lease, e, n));
                assert_eq!(st.0, INVALID);
                assert!(out_lease.is_null());
                redlock_manager_free(mgr);

                assert_eq!(redlock_acquire_opts_set_wait_ms(opts, 1), INVALID);
                assert_eq!(redlock_acquire_opts_set_notify(opts, false), INVALID);
                assert_eq!(redlock_acquire_opts_set_retries(opts), INVALID);
                assert_eq!(redlock_acquire_opts_set_fenced(opts, true), INVALID);
                assert_eq!(redlock_acquire_opts_set_auto_renew(opts, 1, 1), INVALID);
                assert_eq!(redlock_acquire_opts_set_cancel(opts, null_mut()), INVALID);
                // The options are checked before the manager, which may then be anything.
                let (st, msg) = call(|e, n| {
                    redlock_acquire(null_mut(), r, 1, 1000, opts, &mut out_lease, e, n)
                });
                assert_eq!(st, INVALID);
                assert!(
                    msg.starts_with("opts is not a live redlock_acquire_opts"),
                    "{msg}"
                );
                redlock_acquire_opts_free(opts);

                redlock_cancel_fire(cancel);
                assert!(!redlock_cancel_is_fired(cancel));
                let live_opts = redlock_acquire_opts_new();
                assert_eq!(redlock_acquire_opts_set_cancel(live_opts, cancel), INVALID);
                redlock_acquire_opts_free(live_opts);
                redlock_cancel_free(cancel);

                assert_eq!(call(|e, n| redlock_extend(lease, 1000, e, n)).0, INVALID);
                let (st, msg) = call(|e, n| redlock_unlock(lease, e, n));
                assert_eq!(st, INVALID);
                assert!(
                    msg.starts_with("lease is not a live redlock_lease"),
                    "{msg}"
                );
                let st = call(|e, n| redlock_lease_auto_renew(lease, 0, 0, None, null_mut(), e, n));
                assert_eq!(st.0, INVALID);
                assert_eq!(redlock_lease_fencing_token(lease), 0);
                assert!(!redlock_lease_is_renewing(lease));
                assert_eq!(
                    redlock_lease_lost_reason(lease, text.as_mut_ptr(), text.len()),
                    0
                );
                assert_eq!(redlock_lease_ttl_ms(lease), 0);
                assert_eq!(redlock_lease_validity_ms(lease), 0);
                assert!(!redlock_lease_is_valid(lease));
                assert!(redlock_lease_token(lease).is_null());
                let mut len = 7;
                assert!(redlock_lease_resource(lease, &mut len).is_null());
                assert_eq!(len, 7, "not written");
                assert_eq!(redlock_lease_node_count(lease), 0);
                assert_eq!(redlock_lease_granted(lease), 0);
                assert_eq!(redlock_lease_node_outcomes(lease, null_mut(), 0), 0);
                redlock_lease_stop_renewal(lease);
                assert!(!redlock_lease_is_lost(lease));
                assert!(!redlock_lease_wait_lost(lease, 1));
                redlock_lease_free(lease);
            }
            // The ignored frees wrote nothing.
            for buf in [&cfg_buf, &mgr_buf, &opts_buf, &cancel_buf, &lease_buf] {
                assert!(buf.iter().all(|&w| w == fill));
            }
        }
    }

    #[test]
    fn another_types_magic_is_rejected() {
        let magics = [
            <redlock_config as Handle>::MAGIC,
            <redlock_manager as Handle>::MAGIC,
            <redlock_acquire_opts as Handle>::MAGIC,
            <redlock_cancel as Handle>::MAGIC,
            <redlock_lease as Handle>::MAGIC,
        ];
        let distinct: std::collections::HashSet<_> = magics.iter().chain([&FREED_MAGIC]).collect();
        assert_eq!(distinct.len(), magics.len() + 1);
        for m in magics {
            let mut lease_buf = forged::<redlock_lease>(m);
            let mut cfg_buf = forged::<redlock_config>(m);
            let lease = lease_buf.as_mut_ptr().cast::<redlock_lease>();
            let cfg = cfg_buf.as_mut_ptr().cast::<redlock_config>();
            // SAFETY: forged handles, rejected unless `m` is their own type's magic (skipped).
            unsafe {
                if m != <redlock_lease as Handle>::MAGIC {
                    let st = redlock_unlock(lease, std::ptr::null_mut(), 0);
                    assert_eq!(st, REDLOCK_STATUS_INVALID_HANDLE);
                    assert_eq!(redlock_lease_ttl_ms(lease), 0);
                }
                if m != <redlock_config as Handle>::MAGIC {
                    let st = redlock_config_set_retry(cfg, 1, 1, std::ptr::null_mut(), 0);
                    assert_eq!(st, REDLOCK_STATUS_INVALID_HANDLE);
                }
            }
        }
    }

    #[test]
    fn misaligned_handles_are_rejected_unread() {
        let mut buf = forged::<redlock_lease>(0);
        // SAFETY: one byte into the buffer: in bounds, misaligned, never dereferenced.
        let lease = unsafe { buf.as_mut_ptr().cast::<u8>().add(1) }.cast::<redlock_lease>();
        // SAFETY: the check rejects the pointer before reading through it.
        unsafe {
            assert_eq!(
                redlock_unlock(lease, std::ptr::null_mut(), 0),
                REDLOCK_STATUS_INVALID_HANDLE
            );
            assert_eq!(redlock_lease_ttl_ms(lease), 0);
            redlock_lease_free(lease);
        }
    }

    #[test]
    fn null_handles_still_give_null_argument() {
        // SAFETY: NULL handles and no error buffers.
        unsafe {
            let st = redlock_config_set_retry(std::ptr::null_mut(), 1, 1, std::ptr::null_mut(), 0);
            assert_eq!(st, REDLOCK_STATUS_NULL_ARGUMENT);
            assert_eq!(
                redlock_acquire_opts_set_fenced(std::ptr::null_mut(), true),
                REDLOCK_STATUS_NULL_ARGUMENT
            );
            let (st, msg) = call(|e, n| redlock_unlock(std::ptr::null_mut(), e, n));
            assert_eq!(
                (st, msg.as_str()),
                (REDLOCK_STATUS_NULL_ARGUMENT, "lease is NULL")
            );
            redlock_lease_free(std::ptr::null_mut());
        }
    }

    #[test]
    fn live_handles_pass_and_free_overwrites_the_magic() {
        let c = redlock_cancel_new();
        let opts = redlock_acquire_opts_new();
        let cfg = redlock_config_new();
        // SAFETY: live handles from their constructors, each freed once below.
        unsafe {
            assert_eq!(redlock_acquire_opts_set_cancel(opts, c), REDLOCK_STATUS_OK);
            redlock_cancel_fire(c);
            assert!(redlock_cancel_is_fired(c));
            assert_eq!(
                redlock_acquire_opts_set_cancel(opts, std::ptr::null_mut()),
                REDLOCK_STATUS_OK
            );
            let st = redlock_config_set_retry(cfg, 1, 1, std::ptr::null_mut(), 0);
            assert_eq!(st, REDLOCK_STATUS_OK);
            // What `*_free` does before it deallocates, here without deallocating.
            let b = take(c).expect("live");
            let p = Box::into_raw(b);
            assert_eq!(
                std::ptr::read_volatile(<redlock_cancel as Handle>::magic_ptr(p)),
                <redlock_cancel as Handle>::MAGIC
            );
            std::ptr::write_volatile(<redlock_cancel as Handle>::magic_ptr(p), FREED_MAGIC);
            assert!(!redlock_cancel_is_fired(p));
            redlock_cancel_free(p); // ignored: already "freed"
            std::ptr::write_volatile(
                <redlock_cancel as Handle>::magic_ptr(p),
                <redlock_cancel as Handle>::MAGIC,
            );
            redlock_cancel_free(p);
            redlock_acquire_opts_free(opts);
            redlock_config_free(cfg);
        }
    }

    /// A real use after free and double free. Reading freed memory is undefined behaviour, so
    /// this is the best-effort case; it is reliable here because nothing allocates on this
    /// thread between the free and the checks (the failure paths of `check` allocate nothing),
    /// so the block is not reused by a new handle of the same type. The forged-handle tests
    /// above are the deterministic ones.
    #[test]
    fn a_double_free_is_detected_best_effort() {
        let c = redlock_cancel_new();
        let cfg = redlock_config_new();
        // SAFETY: see above: deliberately breaks the contract of `*_free` and the accessors.
        unsafe {
            redlock_cancel_fire(c);
            redlock_cancel_free(c);
            redlock_cancel_free(c);
            assert!(!redlock_cancel_is_fired(c));
            redlock_config_free(cfg);
            redlock_config_free(cfg);
            let st = redlock_config_set_retry(cfg, 1, 1, std::ptr::null_mut(), 0);
            assert_eq!(st, REDLOCK_STATUS_INVALID_HANDLE);
        }
    }

    #[test]
    fn every_status_has_a_string() {
        for (n, s) in [
            (0, "ok"),
            (1, "not acquired"),
            (2, "not held"),
            (3, "unavailable"),
            (4, "authentication failed"),
            (5, "cancelled"),
            (10, "invalid argument"),
            (11, "null argument"),
            (12, "invalid handle"),
            (20, "internal error"),
            (99, "panic"),
            (-1, "unknown status"),
            (6, "unknown status"),
            (i32::MAX, "unknown status"),
        ] {
            // SAFETY: redlock_status_str returns a static NUL-terminated string.
            let got = unsafe { CStr::from_ptr(redlock_status_str(n)) };
            assert_eq!(got.to_str().unwrap(), s);
        }
    }
}
