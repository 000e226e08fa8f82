//! The pool of connection sets a manager's threads share.
//!
//! Each operation borrows one set for one step and gives it back, so threads never wait on
//! each other's I/O; the pool's mutex is held only to push or pop. Idle sets are reused last
//! in, first out, which keeps the fewest connections warm.
//!
//! One case needs a *particular* set. An acquisition returns as soon as a quorum granted it,
//! so a slow node may not have processed its `SET` yet. If the unlock then went out on another
//! connection, the node could run the release first and the late `SET` after it, leaving the
//! key behind until its TTL. Commands on one connection are processed in order, so such an
//! unlock asks for the set that carried the acquisition ([`Pool::checkout_preferring`]),
//! waiting briefly if another thread is using it.

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::node::ConnSet;

struct State {
    idle: Vec<ConnSet>,
    busy: HashSet<u64>,
    /// Sets someone is waiting for, with the number of waiters: other threads leave them
    /// alone when they come back, so a waiter is not starved by the last-in-first-out reuse.
    wanted: HashMap<u64, usize>,
    next_id: u64,
}

pub(crate) struct Pool {
    state: Mutex<State>,
    returned: Condvar,
    nodes: usize,
    max_idle: usize,
}

impl Pool {
    pub(crate) fn new(nodes: usize, max_idle: usize) -> Pool {
        Pool {
            state: Mutex::new(State {
                idle: Vec::new(),
                busy: HashSet::new(),
                wanted: HashMap::new(),
                next_id: 1,
            }),
            returned: Condvar::new(),
            nodes,
            max_idle,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take_any(&self, st: &mut State) -> ConnSet {
        let free = st.idle.iter().rposition(|s| !st.wanted.contains_key(&s.id));
        let set = match free {
            Some(pos) => st.idle.remove(pos),
            None => {
                let id = st.next_id;
                st.next_id += 1;
                ConnSet::new(self.nodes, id)
            }
        };
        st.busy.insert(set.id);
        set
    }

    /// Any idle set, or a new one (connections are made by its first step).
    pub(crate) fn checkout(&self) -> ConnSet {
        let mut st = self.lock();
        self.take_any(&mut st)
    }

    /// The set `id` while `needed()` holds: taken at once if idle, waited for (until
    /// `deadline`) if another thread is using it. Any set when it is no longer needed, no
    /// longer exists, or the deadline passes.
    pub(crate) fn checkout_preferring(
        &self,
        id: u64,
        deadline: Instant,
        needed: impl Fn() -> bool,
    ) -> ConnSet {
        let mut st = self.lock();
        *st.wanted.entry(id).or_insert(0) += 1;
        let set = loop {
            if !needed() {
                break None;
            }
            if let Some(pos) = st.idle.iter().position(|s| s.id == id) {
                let set = st.idle.swap_remove(pos);
                st.busy.insert(set.id);
                break Some(set);
            }
            if !st.busy.contains(&id) {
                // Dropped (the pool was full): its connections are closed.
                break None;
            }
            let now = Instant::now();
            if now >= deadline {
                log::debug!("connection set {id} still busy; unlocking over another");
                break None;
            }
            st = self
                .returned
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        if let Some(n) = st.wanted.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                st.wanted.remove(&id);
            }
        }
        match set {
            Some(set) => set,
            None => self.take_any(&mut st),
        }
    }

    /// Gives a set back. Beyond the idle limit it is dropped, closing its connections.
    pub(crate) fn checkin(&self, set: ConnSet) {
        let mut st = self.lock();
        st.busy.remove(&set.id);
        if st.idle.len() < self.max_idle || st.wanted.contains_key(&set.id) {
            st.idle.push(set);
        }
        // Only checkout_preferring waits, and it registers in `wanted` first: skip the
        // wake-up (a futex system call every time) when nobody waits.
        let waiters = !st.wanted.is_empty();
        drop(st);
        if waiters {
            self.returned.notify_all();
        }
    }

    /// How many sets are idle (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        self.lock().idle.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;
    use std::time::Duration;

    #[test]
    fn reuses_last_in_first_out_and_caps_idle_sets() {
        let p = Pool::new(3, 2);
        let a = p.checkout();
        let b = p.checkout();
        let c = p.checkout();
        let (ia, ib, ic) = (a.id, b.id, c.id);
        assert!(ia != ib && ib != ic && ia != ic);
        p.checkin(a);
        p.checkin(b);
        p.checkin(c); // beyond the cap of 2: dropped
        assert_eq!(p.idle(), 2);
        assert_eq!(p.checkout().id, ib);
        assert_eq!(p.checkout().id, ia);
    }

    #[test]
    fn prefers_a_particular_idle_set() {
        let p = Pool::new(1, 8);
        let sets: Vec<_> = (0..4).map(|_| p.checkout()).collect();
        let want = sets[1].id;
        for s in sets {
            p.checkin(s);
        }
        let far = Instant::now() + Duration::from_secs(10);
        assert_eq!(p.checkout_preferring(want, far, || true).id, want);
    }

    #[test]
    fn waits_for_a_busy_set_until_it_returns() {
        let p = Arc::new(Pool::new(1, 8));
        let held = p.checkout();
        let want = held.id;
        let p2 = Arc::clone(&p);
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            p2.checkin(held);
            // Another thread grabbing a set right after must not take the wanted one.
            for _ in 0..100 {
                let s = p2.checkout();
                assert!(s.id != want || p2.lock().wanted.is_empty());
                p2.checkin(s);
            }
        });
        let start = Instant::now();
        let got = p.checkout_preferring(want, start + Duration::from_secs(10), || true);
        assert_eq!(got.id, want);
        assert!(start.elapsed() >= Duration::from_millis(40));
        t.join().unwrap();
    }

    #[test]
    fn gives_any_set_when_not_needed_gone_or_late() {
        let p = Pool::new(1, 1);
        let far = Instant::now() + Duration::from_secs(10);
        // Unknown (never existed or dropped): no wait.
        let start = Instant::now();
        let s = p.checkout_preferring(999, far, || true);
        assert!(start.elapsed() < Duration::from_secs(1));
        // Busy but no longer needed: no wait.
        let needed = AtomicBool::new(false);
        let other = p.checkout_preferring(s.id, far, || needed.load(Ordering::SeqCst));
        assert_ne!(other.id, s.id);
        // Busy and needed, but the deadline passes.
        let start = Instant::now();
        let third = p.checkout_preferring(s.id, start + Duration::from_millis(30), || true);
        assert_ne!(third.id, s.id);
        assert!(start.elapsed() >= Duration::from_millis(30));
    }
}
