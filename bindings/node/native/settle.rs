//! Settling Promises, from the event loop's coroutines or the binding's threads.
//!
//! A call that finishes in one of the event loop's own callbacks is settled at that callback's
//! end, directly, in a callback scope ([`collecting`]); one that finishes inside the
//! JavaScript call that made it, before it returns ([`inline`]). Any other (from a binding
//! thread) goes through one N-API thread-safe function per JavaScript thread
//! (the main thread, each worker thread), made on first use and shared by every call, instead
//! of one per call. It is referenced (keeps the event loop alive) only while calls are
//! pending, so a process with nothing pending exits as it would without the binding. A call
//! that finishes after its environment was torn down is dropped.

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
    // SAFETY: called by N-API on the JavaScript thread, inside its own scopes.
    unsafe { finish(env, *done) };
}

/// Settles one Promise, and lets the event loop go once nothing is pending.
///
/// # Safety
/// `env` is the Promise's environment, on its JavaScript thread, with a handle scope open.
unsafe fn finish(env: sys::napi_env, done: Done) {
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

thread_local! {
    /// How many Promises the callback scope of [`collecting`] that is open now settles (0:
    /// none is open).
    static SETTLING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many Promises are being settled together now, on this thread: the continuations that
/// run in the same callback scope (`looped` lets a call's driver defer its write when there are
/// others).
pub fn settling() -> usize {
    SETTLING.try_with(|c| c.get()).unwrap_or(0)
}

thread_local! {
    /// While one of the event loop's callbacks of this thread runs (see [`collecting`]): the
    /// settlements of this thread's Promises made meanwhile, settled when it ends.
    static COLLECTED: RefCell<Option<Vec<Done>>> = const { RefCell::new(None) };
}

/// Runs `f` collecting the settlements of this thread's Promises made meanwhile: what it
/// settled, or `None` when a collection was open already (the outer one settles them).
fn collected(f: impl FnOnce()) -> Option<Vec<Done>> {
    let outer = COLLECTED
        .try_with(|c| {
            let mut c = c.borrow_mut();
            let outer = c.is_some();
            if !outer {
                *c = Some(Vec::new());
            }
            outer
        })
        .unwrap_or(true);
    f();
    if outer {
        return None;
    }
    COLLECTED.try_with(|c| c.borrow_mut().take()).ok().flatten()
}

/// Runs `f`, one of the event loop's own callbacks on this JavaScript thread (not inside
/// JavaScript), then settles the Promises of the calls that finished in it, there: in one
/// callback scope, whose end runs the microtasks (the callers' `await` continuations, which
/// may make their next calls at once). Through the thread-safe function each settlement
/// would wait for the loop's next turn, and wake it through its own descriptor.
pub fn collecting(env: sys::napi_env, cx: sys::napi_async_context, f: impl FnOnce()) {
    let Some(done) = collected(f) else {
        return;
    };
    if done.is_empty() {
        return;
    }
    // SAFETY: on the JavaScript thread of `env`, outside JavaScript (a libuv callback), as
    // Node's own callbacks are: a handle scope for the values made, a callback scope for the
    // microtasks. Its resource is a fresh object; `cx` was made for this environment.
    unsafe {
        let mut hs = ptr::null_mut();
        if sys::napi_open_handle_scope(env, &mut hs) != sys::Status::napi_ok {
            // Not settled here: through the thread-safe function, as from a thread.
            done.into_iter().for_each(Pending::queue);
            return;
        }
        let mut resource = ptr::null_mut();
        let mut scope = ptr::null_mut();
        if sys::napi_create_object(env, &mut resource) != sys::Status::napi_ok
            || sys::napi_open_callback_scope(env, resource, cx, &mut scope) != sys::Status::napi_ok
        {
            // Settled outside a callback scope, the continuations would wait for whatever
            // JavaScript runs next: through the thread-safe function instead.
            sys::napi_close_handle_scope(env, hs);
            done.into_iter().for_each(Pending::queue);
            return;
        }
        let _ = SETTLING.try_with(|c| c.set(done.len()));
        for d in done {
            finish(env, d);
        }
        sys::napi_close_callback_scope(env, scope);
        let _ = SETTLING.try_with(|c| c.set(0));
        sys::napi_close_handle_scope(env, hs);
    }
}

/// Runs `f` inside a JavaScript call on this thread (a call of the binding made by
/// JavaScript), then settles the Promises of the calls that finished in it, at once: a call
/// whose replies were all in before it had to wait resolves before the JavaScript call
/// returns (its caller's continuation runs with the microtasks, as for any settled Promise)
/// instead of waiting for the loop's next turn through the thread-safe function. Inside a
/// [`collecting`] callback, those are left to it.
pub fn inline(env: sys::napi_env, f: impl FnOnce()) {
    let Some(done) = collected(f) else {
        return;
    };
    for d in done {
        // SAFETY: on the JavaScript thread of `env`, inside a JavaScript call, whose handle
        // scope holds the values made.
        unsafe { finish(env, d) };
    }
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

// SAFETY: the deferred is only used again on the JavaScript thread, in `call_js` or
// `collecting`.
unsafe impl Send for Pending {}

impl Pending {
    /// Whether the Promise can no longer be settled: its environment was torn down.
    pub fn is_closed(&self) -> bool {
        *self.tsfn.closed.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles the Promise on its JavaScript thread with what `resolve` makes there: at the
    /// end of the loop's callback that runs now, when this is one of its thread's (see
    /// [`collecting`]); else through the thread's thread-safe function.
    pub fn settle(self, resolve: Resolver) {
        let mut done = Some(Done {
            deferred: self.deferred,
            resolve,
        });
        let raw = self.tsfn.raw;
        let _ = COLLECTED.try_with(|c| {
            if let Some(list) = c.borrow_mut().as_mut() {
                let here = LOCAL
                    .try_with(|l| l.borrow().as_ref().is_some_and(|l| l.tsfn.raw == raw))
                    .unwrap_or(false);
                if here {
                    list.extend(done.take());
                }
            }
        });
        if let Some(done) = done {
            self.tsfn.queue_done(done);
        }
    }

    /// Settles `done` through its thread's thread-safe function (the one current on this
    /// thread: `collecting` only holds this thread's Promises).
    fn queue(done: Done) {
        let tsfn = LOCAL.with(|l| l.borrow().as_ref().map(|l| l.tsfn.clone()));
        match tsfn {
            Some(t) => t.queue_done(done),
            None => drop(done),
        }
    }
}

impl Tsfn {
    /// Hands `done` to the thread-safe function, unless it was finalized (its environment
    /// torn down: the Promise is never settled).
    fn queue_done(&self, done: Done) {
        let done = Box::into_raw(Box::new(done));
        let closed = self.closed.read().unwrap_or_else(|e| e.into_inner());
        let status = if *closed {
            sys::Status::napi_closing
        } else {
            unsafe {
                sys::napi_call_threadsafe_function(
                    self.raw,
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
