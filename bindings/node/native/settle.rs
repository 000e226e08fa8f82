//! Settling Promises from the binding's threads: one N-API thread-safe function per
//! JavaScript thread (the main thread, each worker thread), made on first use and shared by
//! every call, instead of one per call. It is referenced (keeps the event loop alive) only
//! while calls are pending, so a process with nothing pending exits as it would without the
//! binding. A call that finishes after its environment was torn down is dropped.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;

use napi::{sys, Env, JsObject, NapiRaw, NapiValue, Result};

use crate::Resolver;

struct Done {
    deferred: sys::napi_deferred,
    resolve: Resolver,
}

/// The thread-safe function's handle, handed to the binding's threads.
#[derive(Clone, Copy)]
pub struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: N-API allows napi_call_threadsafe_function from any thread.
unsafe impl Send for Tsfn {}

struct Local {
    tsfn: Tsfn,
    pending: usize,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::from_reason(format!(
            "{what} failed (napi status {status})"
        )))
    }
}

unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _f: sys::napi_value,
    _ctx: *mut c_void,
    data: *mut c_void,
) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the Box<Done> leaked by `Pending::settle`.
    let done = unsafe { Box::from_raw(data as *mut Done) };
    if env.is_null() {
        return; // the environment is going away: nothing to settle
    }
    let e = unsafe { Env::from_raw(env) };
    match (done.resolve)(e) {
        Ok(v) => unsafe {
            sys::napi_resolve_deferred(env, done.deferred, v.raw());
        },
        Err(err) => unsafe {
            let msg = e
                .create_string(&err.reason)
                .map(|s| s.raw())
                .unwrap_or(ptr::null_mut());
            let mut obj = ptr::null_mut();
            sys::napi_create_error(env, ptr::null_mut(), msg, &mut obj);
            sys::napi_reject_deferred(env, done.deferred, obj);
        },
    }
    LOCAL.with(|l| {
        if let Some(l) = l.borrow_mut().as_mut() {
            l.pending -= 1;
            if l.pending == 0 {
                unsafe { sys::napi_unref_threadsafe_function(env, l.tsfn.0) };
            }
        }
    });
}

fn tsfn(env: &Env) -> Result<Tsfn> {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if let Some(x) = l.as_ref() {
            return Ok(x.tsfn);
        }
        let name = env.create_string("redlock-quorum")?;
        let mut t = ptr::null_mut();
        check(
            unsafe {
                sys::napi_create_threadsafe_function(
                    env.raw(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                    name.raw(),
                    0,
                    1,
                    ptr::null_mut(),
                    None,
                    ptr::null_mut(),
                    Some(call_js),
                    &mut t,
                )
            },
            "napi_create_threadsafe_function",
        )?;
        check(
            unsafe { sys::napi_unref_threadsafe_function(env.raw(), t) },
            "unref",
        )?;
        *l = Some(Local {
            tsfn: Tsfn(t),
            pending: 0,
        });
        Ok(Tsfn(t))
    })
}

/// A Promise's resolving end, sent to a binding thread.
pub struct Pending {
    tsfn: Tsfn,
    deferred: sys::napi_deferred,
}

// SAFETY: the deferred is only used again on the JavaScript thread, in `call_js`.
unsafe impl Send for Pending {}

impl Pending {
    /// Settles the Promise on its JavaScript thread with what `resolve` makes there.
    pub fn settle(self, resolve: Resolver) {
        let done = Box::into_raw(Box::new(Done {
            deferred: self.deferred,
            resolve,
        }));
        let status = unsafe {
            sys::napi_call_threadsafe_function(
                self.tsfn.0,
                done as *mut c_void,
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        if status != sys::Status::napi_ok {
            // The environment is closing: the Promise is never settled.
            drop(unsafe { Box::from_raw(done) });
        }
    }
}

/// A new Promise and its resolving end. The event loop stays alive until it is settled.
pub fn promise(env: &Env) -> Result<(Pending, JsObject)> {
    let tsfn = tsfn(env)?;
    let mut deferred = ptr::null_mut();
    let mut p = ptr::null_mut();
    check(
        unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut p) },
        "napi_create_promise",
    )?;
    LOCAL.with(|l| {
        if let Some(l) = l.borrow_mut().as_mut() {
            if l.pending == 0 {
                unsafe { sys::napi_ref_threadsafe_function(env.raw(), l.tsfn.0) };
            }
            l.pending += 1;
        }
    });
    Ok((Pending { tsfn, deferred }, unsafe {
        JsObject::from_raw_unchecked(env.raw(), p)
    }))
}
