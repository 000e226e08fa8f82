//! Calls run on the event loop: each call is a coroutine on its JavaScript thread, and every
//! wait of the engine (`redlock::park`) suspends it until libuv sees one of its descriptors
//! ready or its time pass. The thread that waits for the nodes' replies is then the one that
//! settles the Promise: a reply wakes the JavaScript thread once, as it wakes a C caller
//! blocked in `poll(2)` once, with no hand-over between threads (`pool` pays two wake-ups
//! per call: the binding's thread's, then the JavaScript thread's).
//!
//! **How the loop watches.** The descriptors a call waits on go into one epoll set of the
//! binding's own per JavaScript thread (edge-triggered, and left there: see `Loop::enlist`),
//! which libuv watches as one descriptor (an epoll set is pollable). libuv never sees the
//! engine's sockets, so a socket the engine closes while a call waits on it (a connection
//! dropped by another call) can confuse nothing of libuv's: the kernel drops it from the set.
//! Each suspended call with a time limit has a libuv timer, which runs only while it is
//! suspended. The set is watched from the thread's first call on, by a poll handle that is
//! unreferenced: it never keeps the loop alive by itself (a pending call does, through its
//! Promise, since `settle` references its thread-safe function while calls are pending, and
//! through its timer while it waits), so an idle
//! binding keeps no event loop alive. Starting and stopping the watch around each wait cost
//! libuv three `epoll_ctl` calls per wait, and with no call waiting the set is quiet: only
//! input (a late reply, a closed connection) wakes it, once, since it is edge-triggered.
//!
//! **Writes.** A call that does not drive its connection leaves its command in the
//! connection's buffer (`Park::defers_writes`), and so does the driver when other calls are
//! about to write in the same turn (`Park::defers_driver_writes`); a prepare handle writes
//! every such buffer before the loop polls, the epoll set's callback does so before its own
//! work, and each callback after its Promises' continuations, so the calls made in one turn go
//! out in one write per node. The driver on this thread does not poll for output while the
//! loop owes the write, so the loop must make it: it always does before it polls. (A call
//! moved to one of the binding's threads does poll for output, and writes it there.)
//!
//! **Settling.** The loop's callbacks (the epoll set's, a timer's, the prepare handle's) settle
//! the Promises of the calls that finished in them at their end, in one N-API callback scope
//! (`settle::collecting`), as Node settles its own I/O: the callers' continuations run there
//! (the microtasks run as the scope closes), their next calls are made, and what those leave
//! buffered is written before the loop polls again. A call that finishes inside the
//! JavaScript call that made it (its replies were in before it had to wait) is settled before
//! that call returns (`settle::inline`). One that finishes on one of the binding's threads
//! settles through its thread's thread-safe function, which costs the loop one more turn and
//! a wake-up through its own descriptor: with 8 clients 1 ms from their nodes, that turn was
//! what kept this binding 3 to 6 % behind node-redlock, and with one client and no delay a
//! call ending inside its JavaScript call paid it 0.39 times per cycle.
//!
//! **What does not run here.** A call that would block its thread outside `poll(2)` (a
//! lock's mutex held by another thread for microseconds) blocks for that long, as any native
//! call does. An environment torn down (a worker terminated) with calls suspended moves them
//! to one of the binding's threads, where they go on to their end (`torn_down`, `Moved`);
//! their Promises are never settled, and a lock granted then is released at once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::io;
use std::os::fd::RawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use napi::{sys, Env, NapiRaw};
use redlock::park::{self, Park, Parked, PollFd, State};

use crate::pool::Job;

// libuv, as the running `node` exports it (every Node.js since 12 links it in and exports its
// symbols for addons). Handles are allocated with `uv_handle_size` and used only through
// these functions: the binding never depends on libuv's struct layouts.
const UV_POLL: c_int = 8;
const UV_PREPARE: c_int = 9;
const UV_TIMER: c_int = 13;
const UV_READABLE: c_int = 1;

type UvPollCb = unsafe extern "C" fn(*mut c_void, c_int, c_int);
type UvTimerCb = unsafe extern "C" fn(*mut c_void);
type UvCloseCb = unsafe extern "C" fn(*mut c_void);
type UvPrepareCb = unsafe extern "C" fn(*mut c_void);

extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_poll_init(lp: *mut c_void, h: *mut c_void, fd: c_int) -> c_int;
    fn uv_poll_start(h: *mut c_void, events: c_int, cb: UvPollCb) -> c_int;
    fn uv_timer_init(lp: *mut c_void, h: *mut c_void) -> c_int;
    fn uv_timer_start(h: *mut c_void, cb: UvTimerCb, timeout: u64, repeat: u64) -> c_int;
    fn uv_timer_stop(h: *mut c_void) -> c_int;
    fn uv_close(h: *mut c_void, cb: UvCloseCb);
    fn uv_prepare_init(lp: *mut c_void, h: *mut c_void) -> c_int;
    fn uv_prepare_start(h: *mut c_void, cb: UvPrepareCb) -> c_int;
    fn uv_unref(h: *mut c_void);
    fn uv_handle_set_data(h: *mut c_void, data: *mut c_void);
    fn uv_handle_get_data(h: *const c_void) -> *mut c_void;
}

/// A coroutine's stack: room for the engine's deepest call (a TLS handshake), committed by
/// the kernel only as it is touched.
const STACK: usize = 1 << 20;
/// Stacks kept for reuse per JavaScript thread.
const KEEP_STACKS: usize = 16;

/// What a suspended call waits for: its descriptors and its time limit.
struct Wait {
    fds: Vec<PollFd>,
    timeout: Option<Duration>,
}

type Co = Coroutine<Vec<PollFd>, Wait, State, DefaultStack>;

/// One call on this thread.
struct Task {
    /// `None` while it runs.
    co: Option<Co>,
    /// What it waits for, `revents` filled as readiness comes.
    fds: Vec<PollFd>,
    /// Its libuv timer (made on its first wait with a time limit).
    timer: *mut c_void,
    /// Whether readiness or time has come since it was suspended.
    due: bool,
    /// When its wait ends, if it has a time limit.
    until: Option<Instant>,
}

/// The event loop's side of one JavaScript thread.
struct Loop {
    uv: *mut c_void,
    /// The thread's environment, and an async context made in it: the callback scope in
    /// which the loop's callbacks settle Promises (`settle::collecting`).
    env: sys::napi_env,
    cx: sys::napi_async_context,
    /// The binding's epoll set, and libuv's poll handle on it.
    epfd: RawFd,
    watch: *mut c_void,
    /// Runs before each poll of the loop: writes the commands calls left in their connections'
    /// buffers during this turn (`redlock::park::flush_deferred`).
    prepare: *mut c_void,
    tasks: HashMap<u64, Task>,
    next: u64,
    /// Which tasks wait on each descriptor of the set (what for: each task's `fds`). A
    /// descriptor's list stays when it empties, so that a wait allocates nothing here; the
    /// empty ones go when the descriptors known to be in the set are forgotten (`enlist`).
    by_fd: HashMap<RawFd, Vec<u64>>,
    /// The tasks found due by the epoll set's callback (kept to reuse its allocation).
    due: Vec<u64>,
    /// The descriptors known to be in the set, as of `redlock::park::descriptors_opened`'s
    /// count `known_at` (see `enlist`).
    /// Each with whether it is watched for output.
    known: HashMap<RawFd, bool>,
    known_at: u64,
    stacks: Vec<DefaultStack>,
    /// Finished calls' libuv timers (stopped), for the next calls: a call that waits with a
    /// time limit then allocates and closes none.
    timers: Vec<*mut c_void>,
    /// Finished calls' engine state (a waker each), for the next calls.
    states: Vec<State>,
    /// Set when the environment is torn down: nothing more is started or resumed.
    gone: bool,
}

impl Drop for Loop {
    /// A suspended coroutine is never dropped: dropping unwinds its stack by a panic that
    /// the job's own guard would catch (corosensei then aborts). Its stack is leaked instead:
    /// this runs only as the thread or the process ends.
    fn drop(&mut self) {
        for (_, t) in self.tasks.drain() {
            std::mem::forget(t.co);
        }
    }
}

thread_local! {
    static LOOP: RefCell<Option<Rc<RefCell<Loop>>>> = const { RefCell::new(None) };
}

/// The suspending side: the engine's waits, handed to the loop through the coroutine.
struct Suspend(*const Yielder<Vec<PollFd>, Wait>);

impl Park for Suspend {
    /// On the loop's thread (not on a binding thread finishing a torn-down worker's call),
    /// the loop's prepare handle writes what a call leaves buffered: see `before_poll`.
    fn defers_writes(&self) -> bool {
        LOOP.with(|l| l.borrow().as_ref().is_some_and(|l| !l.borrow().gone))
    }

    /// A driver's command waits for the loop's write too when other calls are about to write
    /// in the same turn: another call of this loop is suspended (it may be resumed in this
    /// turn), or other Promises are being settled with this one (their continuations run
    /// next). With 8 busy callers and no network delay, the sends per lock-and-release cycle
    /// fell from 5.8-6.7 to 4.5-4.7 (wake-ups included) and the cycles per second rose by
    /// about a quarter; a lone caller writes at once, as its command would only wait.
    fn defers_driver_writes(&self) -> bool {
        LOOP.with(|l| {
            l.borrow()
                .as_ref()
                .is_some_and(|l| l.borrow().tasks.len() > 1 || crate::settle::settling() > 1)
        })
    }

    fn park(&self, fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
        // Each descriptor is in the loop's epoll set from its first wait on (edge-triggered:
        // see `Loop::enlist`); what is ready already is found by a `poll(2)` that does not
        // wait, and returned at once.
        if let Some(l) = LOOP.with(|l| l.borrow().clone()) {
            l.borrow_mut().enlist(fds);
        }
        // SAFETY: `fds` is a live, exclusively borrowed array of `pollfd`s; timeout 0.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        if n != 0 || timeout.is_some_and(|t| t.is_zero()) {
            return if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            };
        }
        // SAFETY: the yielder belongs to the coroutine whose body runs this call: `Suspend`
        // lives in a `Parked` made inside that body and dropped before it returns.
        let y = unsafe { &*self.0 };
        let back = y.suspend(Wait {
            fds: fds.to_vec(),
            timeout,
        });
        let mut n = 0;
        for (f, b) in fds.iter_mut().zip(back) {
            f.revents = b.revents;
            n += usize::from(b.revents != 0);
        }
        Ok(n)
    }
}

fn the_loop(env: &Env) -> Option<Rc<RefCell<Loop>>> {
    if let Some(l) = LOOP.with(|l| l.borrow().clone()) {
        let gone = l.borrow().gone;
        return (!gone).then_some(l);
    }
    let mut uv = ptr::null_mut();
    // SAFETY: a valid env of this thread; N-API writes the loop's pointer.
    if unsafe { sys::napi_get_uv_event_loop(env.raw(), &mut uv) } != sys::Status::napi_ok {
        return None;
    }
    let uv = uv as *mut c_void;
    // SAFETY: plain system calls; the handle is allocated at libuv's own size for a poll
    // handle and initialised by libuv before any other use.
    let (epfd, watch) = unsafe {
        let epfd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        if epfd < 0 {
            return None;
        }
        let watch = libc::calloc(1, uv_handle_size(UV_POLL));
        if watch.is_null() || uv_poll_init(uv, watch, epfd) != 0 {
            libc::free(watch);
            libc::close(epfd);
            return None;
        }
        // Watched from now on, unreferenced: see the module's "How the loop watches".
        uv_poll_start(watch, UV_READABLE, ready);
        uv_unref(watch);
        (epfd, watch)
    };
    // SAFETY: allocated at libuv's size for a prepare handle and initialised by libuv;
    // unreferenced, so it never keeps the loop alive by itself.
    let prepare = unsafe {
        let h = libc::calloc(1, uv_handle_size(UV_PREPARE));
        if h.is_null() || uv_prepare_init(uv, h) != 0 {
            libc::free(h);
            uv_close(watch, freed);
            libc::close(epfd);
            return None;
        }
        uv_prepare_start(h, before_poll);
        uv_unref(h);
        h
    };
    let mut cx = ptr::null_mut();
    // SAFETY: a valid env of this thread, inside the JavaScript call that made the first
    // call (a handle scope is open); destroyed in `torn_down`.
    unsafe {
        let name = env.create_string("redlock-quorum").map(|s| s.raw());
        if let Ok(name) = name {
            if sys::napi_async_init(env.raw(), ptr::null_mut(), name, &mut cx)
                != sys::Status::napi_ok
            {
                cx = ptr::null_mut();
            }
        }
    }
    let l = Rc::new(RefCell::new(Loop {
        uv,
        env: env.raw(),
        cx,
        epfd,
        watch,
        prepare,
        tasks: HashMap::new(),
        next: 1,
        by_fd: HashMap::new(),
        due: Vec::new(),
        known: HashMap::new(),
        known_at: park::descriptors_opened(),
        stacks: Vec::new(),
        timers: Vec::new(),
        states: Vec::new(),
        gone: false,
    }));
    // SAFETY: a valid env; the hook runs on this thread when the environment is torn down.
    unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(torn_down), ptr::null_mut()) };
    LOOP.with(|s| *s.borrow_mut() = Some(Rc::clone(&l)));
    Some(l)
}

thread_local! {
    static THREADS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sends this JavaScript thread's calls to the binding's threads (`true`) or runs them on its
/// event loop (`false`, the default): the benchmark measures both.
pub fn use_threads(on: bool) {
    THREADS.with(|t| t.set(on));
}

/// Runs `job` as a coroutine of this JavaScript thread; `Err(job)` when the loop cannot be
/// used (the caller runs it on a thread).
pub fn submit(env: &Env, job: Job) -> std::result::Result<(), Job> {
    if THREADS.with(|t| t.get()) {
        return Err(job);
    }
    let Some(l) = the_loop(env) else {
        return Err(job);
    };
    let state = l.borrow_mut().states.pop().unwrap_or_default();
    let stack = match l.borrow_mut().stacks.pop() {
        Some(s) => s,
        None => match DefaultStack::new(STACK) {
            Ok(s) => s,
            Err(_) => return Err(job),
        },
    };
    let co: Co = Coroutine::with_stack(stack, move |y: &Yielder<Vec<PollFd>, Wait>, _| {
        let ctx = Parked::new(Box::new(Suspend(y as *const _)), state);
        let after = park::parked(&ctx, job);
        let state = ctx.take_state();
        drop(ctx);
        after();
        state
    });
    let id = {
        let mut lp = l.borrow_mut();
        let id = lp.next;
        lp.next += 1;
        lp.tasks.insert(
            id,
            Task {
                co: Some(co),
                fds: Vec::new(),
                timer: ptr::null_mut(),
                due: false,
                until: None,
            },
        );
        id
    };
    // A call that finishes without waiting settles its Promise before this JavaScript call
    // returns, not through the loop's next turn.
    crate::settle::inline(env.raw(), || resume(&l, id));
    Ok(())
}

/// Resumes task `id` with the readiness gathered for it, then files its next wait or, once
/// it has finished, frees it.
fn resume(l: &Rc<RefCell<Loop>>, id: u64) {
    let (mut co, fds) = {
        let mut lp = l.borrow_mut();
        let Some(t) = lp.tasks.get_mut(&id) else {
            return;
        };
        t.due = false;
        let fds = std::mem::take(&mut t.fds);
        // The coroutine is taken out while it runs: the loop's state stays free for it.
        let Some(co) = t.co.take() else {
            return;
        };
        (co, fds)
    };
    let out = catch_unwind(AssertUnwindSafe(|| co.resume(fds)));
    let mut lp = l.borrow_mut();
    match out {
        Ok(CoroutineResult::Yield(wait)) => {
            let t = lp.tasks.get_mut(&id).expect("a running task stays listed");
            t.co = Some(co);
            lp.file(id, wait);
        }
        Ok(CoroutineResult::Return(state)) => {
            let t = lp.tasks.remove(&id).expect("a running task stays listed");
            if !t.timer.is_null() {
                if lp.timers.len() < KEEP_STACKS {
                    // SAFETY: an initialised timer (`unfile` stopped it already).
                    unsafe { uv_timer_stop(t.timer) };
                    lp.timers.push(t.timer);
                } else {
                    // SAFETY: the timer was initialised by libuv; freed in `freed` after
                    // closing.
                    unsafe { uv_close(t.timer, freed) };
                }
            }
            if lp.stacks.len() < KEEP_STACKS {
                lp.stacks.push(co.into_stack());
                lp.states.push(state);
            }
        }
        Err(_) => {
            // A panic outside the job's own guard (the job catches its own): the call's
            // Promise is lost with it, the process goes on.
            if let Some(t) = lp.tasks.remove(&id) {
                std::mem::forget(t.co);
                std::mem::forget(co);
            }
        }
    }
}

impl Loop {
    /// Files task `id`'s wait: it is listed as waiting on each of its descriptors, and its
    /// timer runs.
    fn file(&mut self, id: u64, wait: Wait) {
        for f in &wait.fds {
            self.by_fd.entry(f.fd).or_default().push(id);
        }
        let uv = self.uv;
        let t = self.tasks.get_mut(&id).expect("filed tasks are listed");
        t.fds = wait.fds;
        t.until = wait.timeout.map(|d| Instant::now() + d);
        if let Some(d) = wait.timeout {
            if t.timer.is_null() {
                if let Some(h) = self.timers.pop() {
                    t.timer = h;
                }
            }
            if t.timer.is_null() {
                // SAFETY: allocated at libuv's size for a timer, initialised by libuv.
                unsafe {
                    let h = libc::calloc(1, uv_handle_size(UV_TIMER));
                    if !h.is_null() && uv_timer_init(uv, h) == 0 {
                        t.timer = h;
                    } else {
                        libc::free(h);
                    }
                }
            }
            if !t.timer.is_null() {
                let ms = d.as_nanos().div_ceil(1_000_000).min(u64::MAX as u128) as u64;
                // SAFETY: an initialised timer; its data is the task's id.
                unsafe {
                    uv_handle_set_data(t.timer, id as usize as *mut c_void);
                    uv_timer_start(t.timer, expired, ms.max(1), 0);
                }
            }
        }
    }

    /// Puts each of `fds` in the epoll set, unless it is there. A descriptor stays in the set
    /// once added, edge-triggered: an edge that comes while nobody waits on it is dropped
    /// (whoever waits next finds the level by `poll(2)` before suspending), so no call adds
    /// and removes its descriptors each time it waits. A descriptor the engine closes leaves
    /// the set with it (the kernel removes it), and its number may come back as a new
    /// descriptor: the numbers known to be in the set are forgotten whenever the engine has
    /// opened a descriptor since they were learnt (`redlock::park::descriptors_opened`), and
    /// each is added again once (`EEXIST` for those still there). Adding a known descriptor
    /// again each wait cost 12 system calls per lock-and-release cycle.
    ///
    /// A descriptor is watched for output only while some wait asks for it (a connect, a
    /// write the socket could not take whole): a TCP socket signals that it can be written
    /// whenever the peer acknowledges data, so output in the set woke the loop once after
    /// every command sent, for nothing, and cost it three system calls more.
    fn enlist(&mut self, fds: &[PollFd]) {
        let now = park::descriptors_opened();
        if now != self.known_at {
            self.known.clear();
            self.known_at = now;
            self.by_fd.retain(|_, ids| !ids.is_empty());
        }
        for f in fds {
            let mut out = f.events & libc::POLLOUT != 0;
            let op = match self.known.get(&f.fd) {
                None => libc::EPOLL_CTL_ADD,
                Some(&o) if o == out => continue,
                Some(_) => {
                    // Output stays watched while a suspended wait still asks for it.
                    out |= self.wants_output(f.fd);
                    if self.known.get(&f.fd) == Some(&out) {
                        continue;
                    }
                    libc::EPOLL_CTL_MOD
                }
            };
            if self.watch_fd(op, f.fd, out) {
                self.known.insert(f.fd, out);
            }
        }
    }

    /// Whether a suspended task waits for output on `fd`.
    fn wants_output(&self, fd: RawFd) -> bool {
        self.by_fd.get(&fd).is_some_and(|ids| {
            ids.iter().any(|id| {
                self.tasks.get(id).is_some_and(|t| {
                    t.fds
                        .iter()
                        .any(|w| w.fd == fd && w.events & libc::POLLOUT != 0)
                })
            })
        })
    }

    /// Adds `fd` to the epoll set (`op` `EPOLL_CTL_ADD`) or changes what it is watched for
    /// (`EPOLL_CTL_MOD`): input, and output when `out`. Whether it is in the set so.
    fn watch_fd(&self, op: c_int, fd: RawFd, out: bool) -> bool {
        let mut events = libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET;
        if out {
            events |= libc::EPOLLOUT;
        }
        let mut ev = libc::epoll_event {
            events: events as u32,
            u64: fd as u64,
        };
        // SAFETY: plain system calls on the binding's own epoll set.
        unsafe {
            if libc::epoll_ctl(self.epfd, op, fd, &mut ev) == 0 {
                return true;
            }
            // In the set already (a number learnt again), or no longer (closed and reused):
            // the other operation.
            let other = match io::Error::last_os_error().raw_os_error() {
                Some(libc::EEXIST) => libc::EPOLL_CTL_MOD,
                Some(libc::ENOENT) => libc::EPOLL_CTL_ADD,
                _ => return false,
            };
            libc::epoll_ctl(self.epfd, other, fd, &mut ev) == 0
        }
    }

    /// Takes task `id`'s descriptors out of the set and stops its timer.
    fn unfile(&mut self, id: u64) {
        let Some(t) = self.tasks.get(&id) else {
            return;
        };
        if !t.timer.is_null() {
            // SAFETY: an initialised timer.
            unsafe { uv_timer_stop(t.timer) };
        }
        for f in &t.fds {
            let Some(list) = self.by_fd.get_mut(&f.fd) else {
                continue;
            };
            list.retain(|&i| i != id);
        }
    }
}

fn poll_revents(epoll: u32) -> i16 {
    let mut r = 0;
    for (ep, p) in [
        (libc::EPOLLIN, libc::POLLIN),
        (libc::EPOLLOUT, libc::POLLOUT),
        (libc::EPOLLERR, libc::POLLERR),
        (libc::EPOLLHUP, libc::POLLHUP),
        (libc::EPOLLRDHUP, libc::POLLIN),
    ] {
        if epoll & ep as u32 != 0 {
            r |= p;
        }
    }
    r
}

/// libuv: the epoll set is readable. Gathers what is ready for whom, then resumes each task
/// that has something.
unsafe extern "C" fn ready(_h: *mut c_void, _status: c_int, _events: c_int) {
    in_callback(on_ready);
}

fn on_ready() {
    // What the calls made since the last poll left buffered goes out before this turn's work.
    park::flush_deferred();
    let Some(l) = LOOP.with(|l| l.borrow().clone()) else {
        return;
    };
    let mut due;
    {
        let mut guard = l.borrow_mut();
        let lp = &mut *guard;
        due = std::mem::take(&mut lp.due);
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: `evs` is a live array of 64 events; timeout 0.
        let n = unsafe { libc::epoll_wait(lp.epfd, evs.as_mut_ptr(), 64, 0) };
        for ev in evs.iter().take(n.max(0) as usize) {
            let fd = ev.u64 as RawFd;
            let revents = poll_revents(ev.events);
            let Some(ids) = lp.by_fd.get(&fd) else {
                continue;
            };
            for &id in ids {
                if let Some(t) = lp.tasks.get_mut(&id) {
                    let mut any = false;
                    for f in t.fds.iter_mut().filter(|f| f.fd == fd) {
                        f.revents |= revents & (f.events | libc::POLLERR | libc::POLLHUP);
                        any |= f.revents != 0;
                    }
                    if any && !t.due {
                        t.due = true;
                        due.push(id);
                    }
                }
            }
        }
        for &id in &due {
            lp.unfile(id);
        }
    }
    for &id in &due {
        resume(&l, id);
    }
    due.clear();
    l.borrow_mut().due = due;
}

/// libuv: a task's time has passed.
unsafe extern "C" fn expired(h: *mut c_void) {
    // SAFETY: the data was set to the task's id when the timer was started.
    let id = unsafe { uv_handle_get_data(h) } as usize as u64;
    in_callback(|| on_expired(id));
}

fn on_expired(id: u64) {
    let Some(l) = LOOP.with(|l| l.borrow().clone()) else {
        return;
    };
    {
        let mut lp = l.borrow_mut();
        match lp.tasks.get_mut(&id) {
            Some(t) if !t.due => t.due = true,
            _ => return,
        }
        lp.unfile(id);
    }
    resume(&l, id);
}

/// libuv: the loop is about to poll. The commands the calls of this turn left in their
/// connections' buffers go out now, one write per connection.
unsafe extern "C" fn before_poll(_h: *mut c_void) {
    in_callback(park::flush_deferred);
}

/// Runs `f`, one of the loop's callbacks, then settles the Promises of the calls that finished
/// in it, at once (`settle::collecting`: the callers' continuations run there and may make
/// their next calls), and writes what those calls left buffered, as the loop is about to
/// poll.
fn in_callback(f: impl FnOnce()) {
    let here = LOOP.with(|l| {
        l.borrow().as_ref().and_then(|l| {
            let l = l.borrow();
            (!l.gone && !l.cx.is_null()).then_some((l.env, l.cx))
        })
    });
    match here {
        Some((env, cx)) => {
            crate::settle::collecting(env, cx, f);
            park::flush_deferred();
        }
        None => f(),
    }
}

unsafe extern "C" fn freed(h: *mut c_void) {
    // SAFETY: allocated with calloc in `file`, closed by libuv.
    unsafe { libc::free(h) };
}

/// N-API: the environment is being torn down (a worker thread terminated). Its suspended
/// calls go on to their end on one of the binding's threads, as they would have on `pool`:
/// a lock granted then is released at once, since no one can receive it (`spawn_lease`).
unsafe extern "C" fn torn_down(_arg: *mut c_void) {
    let Some(l) = LOOP.with(|l| l.borrow_mut().take()) else {
        return;
    };
    let mut lp = l.borrow_mut();
    lp.gone = true;
    let tasks: Vec<Task> = lp.tasks.drain().map(|(_, t)| t).collect();
    // SAFETY: handles initialised on this loop, closed once, freed by `freed`; the async
    // context was made in this environment, which is still valid in its cleanup hooks.
    unsafe {
        if !lp.cx.is_null() {
            sys::napi_async_destroy(lp.env, lp.cx);
        }
        uv_close(lp.watch, freed);
        uv_close(lp.prepare, freed);
        for h in lp.timers.drain(..) {
            uv_close(h, freed);
        }
        libc::close(lp.epfd);
    }
    for mut t in tasks {
        if !t.timer.is_null() {
            // SAFETY: as above.
            unsafe { uv_close(t.timer, freed) };
        }
        if let Some(co) = t.co.take() {
            let moved = Moved {
                co,
                fds: std::mem::take(&mut t.fds),
                until: t.until,
            };
            crate::pool::submit(Box::new(move || {
                moved.finish();
                Box::new(|| {})
            }));
        }
    }
}

/// A suspended call moved to one of the binding's threads to finish there.
struct Moved {
    co: Co,
    fds: Vec<PollFd>,
    until: Option<Instant>,
}

// SAFETY: a suspended call's stack holds what its job holds (which is `Send`) and what the
// engine's call path holds between two waits: owned buffers, `Arc`s, and its context, an `Rc`
// that nothing else refers to while the call is suspended (the engine takes it off the thread
// for the wait: `park::poll`). No lock is held across a wait. Its JavaScript thread never
// touches it again: the loop that listed it is gone.
unsafe impl Send for Moved {}

impl Moved {
    /// Resumes the call until it ends, each wait a blocking `poll(2)`.
    fn finish(mut self) {
        loop {
            let timeout = self.until.map_or(-1, |u| {
                let left = u.saturating_duration_since(Instant::now());
                left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as c_int
            });
            // SAFETY: a live array of `pollfd`s.
            unsafe {
                libc::poll(
                    self.fds.as_mut_ptr(),
                    self.fds.len() as libc::nfds_t,
                    timeout,
                )
            };
            let fds = std::mem::take(&mut self.fds);
            match catch_unwind(AssertUnwindSafe(|| self.co.resume(fds))) {
                Ok(CoroutineResult::Yield(w)) => {
                    self.fds = w.fds;
                    self.until = w.timeout.map(|d| Instant::now() + d);
                }
                Ok(CoroutineResult::Return(_)) => return,
                Err(_) => {
                    std::mem::forget(self);
                    return;
                }
            }
        }
    }
}
