//! Settling Promises, from the event loop's coroutines or the binding's threads: one N-API thread-safe function per
//! JavaScript thread (the main thread, each worker thread), made on first use and shared by
//! every call, instead of one per call. It is referenced (keeps the event loop alive) only
//! while calls are pending, so a process with nothing pending exits as it would without the
//! binding. A call that finishes after its environment was torn down is dropped.

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, RwLock};

use napi::{sys, Env, JsObject, NapiRaw, NapiValue, Result};

use crate::Resolver;

struct Done {
    deferred: sys::napi_deferred,
    resolve: Resolver,
}

/// The thread-safe function's handle, handed to the binding's threads, with whether it was
/// finalized (its environment torn down: a worker thread terminated, the process exiting).
/// N-API frees a finalized thread-safe function, so no call may reach it after that: a call
/// holds the read lock while it calls, and the finalizer takes the write lock to mark it.
#[derive(Clone)]
pub struct Tsfn {
    raw: sys::napi_threadsafe_function,
    closed: Arc<RwLock<bool>>,
}

// SAFETY: N-API allows napi_call_threadsafe_function from any thread; `closed` keeps calls
// away from a finalized one.
unsafe impl Send for Tsfn {}

unsafe extern "C" fn finalized(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the Arc leaked in `tsfn`, given back once, here.
    let closed = unsafe { Arc::from_raw(data as *const RwLock<bool>) };
    *closed.write().unwrap_or_else(|e| e.into_inner()) = true;
    // A later environment on this thread makes a new one.
    let _ = LOCAL.try_with(|l| l.borrow_mut().take());
}

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
                unsafe { sys::napi_unref_threadsafe_function(env, l.tsfn.raw) };
            }
        }
    });
}

fn tsfn(env: &Env) -> Result<Tsfn> {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if let Some(x) = l.as_ref() {
            return Ok(x.tsfn.clone());
        }
        let name = env.create_string("redlock-quorum")?;
        let closed = Arc::new(RwLock::new(false));
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
                    Arc::into_raw(closed.clone()) as *mut c_void,
                    Some(finalized),
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
        let tsfn = Tsfn { raw: t, closed };
        *l = Some(Local {
            tsfn: tsfn.clone(),
            pending: 0,
        });
        Ok(tsfn)
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
    /// Whether the Promise can no longer be settled: its environment was torn down.
    pub fn is_closed(&self) -> bool {
        *self.tsfn.closed.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles the Promise on its JavaScript thread with what `resolve` makes there.
    pub fn settle(self, resolve: Resolver) {
        let done = Box::into_raw(Box::new(Done {
            deferred: self.deferred,
            resolve,
        }));
        let closed = self.tsfn.closed.read().unwrap_or_else(|e| e.into_inner());
        let status = if *closed {
            sys::Status::napi_closing
        } else {
            unsafe {
                sys::napi_call_threadsafe_function(
                    self.tsfn.raw,
                    done as *mut c_void,
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            }
        };
        drop(closed);
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
                unsafe { sys::napi_ref_threadsafe_function(env.raw(), l.tsfn.raw) };
            }
            l.pending += 1;
        }
    });
    Ok((Pending { tsfn, deferred }, unsafe {
        JsObject::from_raw_unchecked(env.raw(), p)
    }))
}
