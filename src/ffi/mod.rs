//! The C ABI. Every `extern "C"` function lives under this module; `build.rs` turns their doc
//! comments into `include/redlock.h`.
//!
//! Conventions (also in the README, "C API conventions"):
//!
//! * Every fallible function returns a [`redlock_status`] and takes a caller-owned
//!   `char *err, size_t err_len`; on failure the buffer receives a NUL-terminated message,
//!   truncated to fit. Either may be NULL/0. On success it is not touched.
//! * Out-parameters are written only on success.
//! * Every pointer is checked: NULL gives `REDLOCK_STATUS_NULL_ARGUMENT`.
//! * A panic inside the library becomes `REDLOCK_STATUS_PANIC`; it never unwinds into C.
//! * `*_free(NULL)` is a no-op; no `*_free` unlocks anything or waits on the network.
//! * Durations are milliseconds (`*_ms`), resources are `(const uint8_t *, size_t)`.
#![allow(unsafe_code)] // the C ABI: every unsafe block carries a SAFETY comment
#![allow(non_camel_case_types)] // C names: redlock_status, redlock_config, …

mod acquire;
mod cancel;
mod config;
mod lease;
mod manager;

pub use acquire::*;
pub use cancel::*;
pub use config::*;
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

    pub(crate) fn null(what: &str) -> FfiError {
        FfiError {
            status: REDLOCK_STATUS_NULL_ARGUMENT,
            msg: format!("{what} is NULL"),
        }
    }
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
