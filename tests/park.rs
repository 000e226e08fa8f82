//! Calls run as coroutines on one thread, every wait a `redlock::park::Park` (what the Node.js
//! binding does on its event loop), against real redis-server processes. A tiny scheduler
//! stands in for the event loop: it polls the suspended calls' descriptors together and
//! resumes the ones that are ready.
//!
//! What would fail: a wait of the engine that blocked its thread instead of parking (the
//! holder below could never run to release, so the waiter would time out); per-thread state
//! shared by two suspended calls (their rounds would clobber each other's slots); a lock held
//! across a wait (the thread would deadlock). The scheduler also writes what calls leave
//! buffered before each wait, as the Node addon's loop does (without that write the calls
//! stall: a driver on the loop's thread leaves the buffer to the loop).

mod support;

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult, Yielder};
use redlock::park::{Park, Parked, PollFd, State, parked};
use redlock::{LockOptions, Redlock, Wait};
use support::Cluster;

/// What a suspended call waits for.
struct Waiting {
    fds: Vec<PollFd>,
    timeout: Option<Duration>,
}

type Co = Coroutine<Vec<PollFd>, Waiting, ()>;

/// The park of one coroutine: each wait suspends it with what it waits for.
struct Suspend {
    yielder: *const Yielder<Vec<PollFd>, Waiting>,
    parks: Rc<Cell<usize>>,
    /// Whether the connections' drivers leave their commands for the scheduler too.
    drivers_defer: bool,
}

impl Park for Suspend {
    /// As an event loop's: the scheduler writes what calls leave buffered before it polls.
    fn defers_writes(&self) -> bool {
        true
    }

    fn defers_driver_writes(&self) -> bool {
        self.drivers_defer
    }

    fn park(&self, fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
        self.parks.set(self.parks.get() + 1);
        // SAFETY: the yielder is the running coroutine's own; `Suspend` lives in a context
        // made inside its body and dropped before the body returns.
        #[allow(unsafe_code)]
        let y = unsafe { &*self.yielder };
        let back = y.suspend(Waiting {
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

/// A call `f` as a coroutine whose waits are counted in `parks`; `drivers_defer`: see
/// `Suspend`.
fn call(parks: &Rc<Cell<usize>>, drivers_defer: bool, f: impl FnOnce() + 'static) -> Co {
    let parks = Rc::clone(parks);
    Coroutine::new(move |y: &Yielder<Vec<PollFd>, Waiting>, _| {
        let ctx = Parked::new(
            Box::new(Suspend {
                yielder: y as *const _,
                parks,
                drivers_defer,
            }),
            State::default(),
        );
        parked(&ctx, f);
    })
}

/// Runs every call to its end on this thread: one `poll(2)` over all the suspended calls'
/// descriptors, up to the nearest time limit, then each call that is ready or due resumed.
fn run(calls: Vec<Co>, limit: Duration) {
    let end = Instant::now() + limit;
    let mut live: Vec<(Co, Waiting, Option<Instant>)> = Vec::new();
    for mut co in calls {
        if let CoroutineResult::Yield(w) = co.resume(Vec::new()) {
            let until = w.timeout.map(|t| Instant::now() + t);
            live.push((co, w, until));
        }
    }
    while !live.is_empty() {
        assert!(
            Instant::now() < end,
            "the calls did not end within {limit:?}"
        );
        // What the calls left in their connections' buffers goes out before the wait, in one
        // write per connection.
        redlock::park::flush_deferred();
        let mut all: Vec<PollFd> = live.iter().flat_map(|(_, w, _)| w.fds.clone()).collect();
        let now = Instant::now();
        let nearest = live.iter().filter_map(|(_, _, u)| *u).min();
        let ms = nearest.map_or(100, |u| {
            u.saturating_duration_since(now).as_millis().min(100) as i32
        });
        // SAFETY: a live array of pollfd structs; poll(2) writes their revents.
        #[allow(unsafe_code)]
        unsafe {
            libc::poll(all.as_mut_ptr(), all.len() as libc::nfds_t, ms)
        };
        let now = Instant::now();
        let mut at = 0;
        let mut next = Vec::new();
        for (mut co, mut w, until) in live.drain(..) {
            let mine = &all[at..at + w.fds.len()];
            at += w.fds.len();
            let ready = mine.iter().any(|f| f.revents != 0);
            if !ready && until.is_none_or(|u| now < u) {
                next.push((co, w, until));
                continue;
            }
            for (f, r) in w.fds.iter_mut().zip(mine) {
                f.revents = r.revents;
            }
            if let CoroutineResult::Yield(w) = co.resume(w.fds) {
                let until = w.timeout.map(|t| Instant::now() + t);
                next.push((co, w, until));
            }
        }
        live = next;
    }
}

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(support::config(urls).node_timeout(Duration::from_secs(2))).expect("manager")
}

#[test]
fn calls_suspended_on_one_thread_lock_release_and_wake_each_other() {
    suspended_calls_lock_release_and_wake_each_other(false);
}

/// The same with every command left for the scheduler's write before it polls, the drivers'
/// too (what the Node addon's loop does when several calls write in one turn). A driver that
/// then waited for output, or a write the scheduler never made, would stall the calls until
/// their nodes time out.
#[test]
fn calls_whose_every_write_is_left_for_the_loop_still_lock_release_and_wake_each_other() {
    suspended_calls_lock_release_and_wake_each_other(true);
}

fn suspended_calls_lock_release_and_wake_each_other(drivers_defer: bool) {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let parks = Rc::new(Cell::new(0));
    let events = Rc::new(RefCell::new(Vec::<&'static str>::new()));
    let mut calls = Vec::new();

    // Six calls that lock and unlock resources of their own, 10 times each.
    for i in 0..6 {
        let mgr = mgr.clone();
        calls.push(call(&parks, drivers_defer, move || {
            for _ in 0..10 {
                let lease = mgr
                    .try_lock(format!("park:{i}"), Duration::from_secs(10))
                    .expect("an uncontended lock");
                lease.unlock().expect("its release");
            }
        }));
    }
    // A holder that extends its lock a few times (each a round, so it is suspended while the
    // waiter waits), then releases; and a waiter that waits for it, woken by the release.
    let (m1, e1) = (mgr.clone(), Rc::clone(&events));
    let held = m1
        .try_lock("park:shared", Duration::from_secs(20))
        .expect("the holder's lock");
    calls.push(call(&parks, drivers_defer, move || {
        for _ in 0..5 {
            held.extend(Duration::from_secs(20)).expect("an extension");
        }
        e1.borrow_mut().push("released");
        held.unlock().expect("the holder's release");
    }));
    let (m2, e2) = (mgr.clone(), Rc::clone(&events));
    calls.push(call(&parks, drivers_defer, move || {
        let opts = LockOptions::new().wait(Wait::For(Duration::from_secs(15)));
        let lease = m2
            .acquire("park:shared", Duration::from_secs(10), &opts)
            .expect("the waiter, granted once the holder released");
        e2.borrow_mut().push("granted");
        lease.unlock().expect("the waiter's release");
    }));

    run(calls, Duration::from_secs(60));
    assert_eq!(*events.borrow(), ["released", "granted"]);
    assert!(
        parks.get() >= 6 * 10,
        "every call waited through its park ({} parks)",
        parks.get()
    );
    assert_eq!(cluster.present(b"redlock:park:shared"), 0);
    for i in 0..6 {
        assert_eq!(cluster.present(format!("redlock:park:{i}").as_bytes()), 0);
    }
}
