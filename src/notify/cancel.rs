//! [`Cancel`]: stops an acquisition from another thread.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::mux::Waker;

/// A cancellation handle for acquisitions ([`LockOptions::cancel`](crate::LockOptions::cancel)).
///
/// Cheap to clone; every clone is the same handle. [`fire`](Self::fire) may be called from
/// any thread, any number of times: every acquisition using the handle then stops, waking at
/// once if it was waiting, and returns [`Error::Cancelled`](crate::Error::Cancelled), leaving
/// no key behind (an attempt already under way finishes its round first, and whatever it was
/// granted is released). An acquisition started with a handle that has already fired returns
/// `Cancelled` without contacting any node. A fired handle stays fired.
#[derive(Clone, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    fired: AtomicBool,
    next: AtomicU64,
    /// The wakers of the threads waiting under this handle now.
    wakers: Mutex<Vec<(u64, Arc<Waker>)>>,
}

impl Cancel {
    /// A handle that has not fired.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Cancels every acquisition using this handle, now and later. Thread-safe, idempotent.
    pub fn fire(&self) {
        self.inner.fired.store(true, Ordering::SeqCst);
        let wakers = self.inner.wakers.lock().unwrap_or_else(|p| p.into_inner());
        for (_, w) in wakers.iter() {
            w.wake();
        }
    }

    /// True once [`fire`](Self::fire) has been called.
    pub fn is_fired(&self) -> bool {
        self.inner.fired.load(Ordering::SeqCst)
    }

    /// Makes `fire` wake `waker` until the returned guard is dropped.
    pub(crate) fn watch(&self, waker: Arc<Waker>) -> Watch<'_> {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        self.inner
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, waker));
        Watch { cancel: self, id }
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel")
            .field("fired", &self.is_fired())
            .finish()
    }
}

/// While alive, [`Cancel::fire`] wakes the watching thread.
pub(crate) struct Watch<'a> {
    cancel: &'a Cancel,
    id: u64,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.cancel
            .inner
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux;
    use std::time::{Duration, Instant};

    #[test]
    fn fire_wakes_the_watching_thread_and_stays_fired() {
        let c = Cancel::new();
        assert!(!c.is_fired());
        let w = Arc::new(Waker::new().unwrap());
        let guard = c.watch(Arc::clone(&w));
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c2.fire();
            c2.fire(); // idempotent
        });
        let t0 = Instant::now();
        while !c.is_fired() {
            mux::sleep(&w, Some(Duration::from_secs(10))).unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        drop(guard);
        assert!(c.inner.wakers.lock().unwrap().is_empty());
        assert!(format!("{c:?}").contains("fired: true"));
    }
}
