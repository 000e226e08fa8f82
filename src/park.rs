//! Where a caller's thread waits: in `poll(2)` itself (the only caller of it), or, while a
//! call runs inside [`parked`], in the [`Park`] that an event loop installed.
//!
//! A thread normally runs one call at a time and blocks in `poll(2)` while the call waits for
//! replies, wake-ups or time. An event loop that runs many calls on one thread (the Node.js
//! binding runs each on a coroutine of its JavaScript thread) cannot block: it installs a
//! `Park` for the call, and each wait of the call becomes a `park`, which suspends the call
//! until the event loop sees one of the descriptors ready or the time pass, while the loop
//! runs everything else. Every wait of a call comes here: the waits of a round, the pauses
//! between attempts and between re-reads, a waiter's sleep, a host name's look-up.
//!
//! A call's per-thread state (its round's slots and waker, `node::call`) is kept per call while
//! it is parked: `slot` gives the parked call's own, so two calls suspended on one thread
//! never share it.

use std::any::Any;
use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One descriptor to wait on, as `poll(2)` takes it.
pub use libc::pollfd as PollFd;

/// A wait that does not block its thread: an event loop's. Installed for one call by
/// [`parked`].
pub trait Park {
    /// Suspends the call until one of `fds` is ready (as `poll(2)` reports it in `revents`:
    /// `POLLIN`, `POLLOUT`, `POLLERR`, `POLLHUP`, `POLLNVAL`) or `timeout` has passed (`None`:
    /// no limit; an empty `fds` is a pause), and returns how many descriptors are ready (0: the
    /// time passed). Returning early is allowed: every caller looks again and waits again.
    fn park(&self, fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize>;

    /// Whether a command written by a call that does not read its connection may wait in the
    /// connection's buffer until [`flush_deferred`], which the park's owner then promises to
    /// run before its thread next blocks (an event loop: before it polls). The commands of
    /// the calls made in one turn of the loop then go out in one write per node. The default:
    /// no, every command is written at once.
    fn defers_writes(&self) -> bool {
        false
    }

    /// Whether the command of a call that *drives* its connection (reads its replies) may wait
    /// for [`flush_deferred`] too, when [`defers_writes`](Self::defers_writes) holds. Worth it
    /// when other calls of the same turn are about to write to the same nodes, which only the
    /// park's owner knows: their commands and the driver's then go out in one write, where
    /// the driver's own write would have gone ahead alone. Not worth it for a lone call,
    /// whose command would only wait. The default: no, a driver writes at once.
    fn defers_driver_writes(&self) -> bool {
        false
    }
}

/// A call's context while it runs under a [`Park`]: the park, and the call's own state that
/// would otherwise be its thread's.
pub struct Parked {
    park: Box<dyn Park>,
    slot: RefCell<Option<Arc<dyn Any + Send + Sync>>>,
}

/// The state a context keeps for the engine (a call's waker and slots), handed from a finished
/// call's context to the next one's so that it is made once, not per call.
#[derive(Default)]
pub struct State(Option<Arc<dyn Any + Send + Sync>>);

impl Parked {
    /// A context whose waits go to `park`, with `state` (a finished context's, or a new one).
    pub fn new(park: Box<dyn Park>, state: State) -> Rc<Parked> {
        Rc::new(Parked {
            park,
            slot: RefCell::new(state.0),
        })
    }

    /// Takes the context's state, for the next context.
    pub fn take_state(&self) -> State {
        State(self.slot.borrow_mut().take())
    }
}

/// A write left for [`flush_deferred`], and what it writes to (one per connection).
type Deferred = (usize, Box<dyn FnOnce()>);

thread_local! {
    static CURRENT: RefCell<Option<Rc<Parked>>> = const { RefCell::new(None) };
    static DEFERRED: RefCell<Vec<Deferred>> = const { RefCell::new(Vec::new()) };
}

// The thread-locals are read and written only in functions that are never inlined: a parked
// call may be resumed on another thread (the Node addon finishes a torn-down worker's calls on
// a thread of its own), and a function inlined around a wait could reuse a thread-local's
// address computed before it, on the first thread.

/// This thread's context, replaced by `ctx`.
#[inline(never)]
fn swap_current(ctx: Option<Rc<Parked>>) -> Option<Rc<Parked>> {
    CURRENT
        .try_with(|c| std::mem::replace(&mut *c.borrow_mut(), ctx))
        .unwrap_or(None)
}

/// This thread's context, left in place.
#[inline(never)]
fn current() -> Option<Rc<Parked>> {
    CURRENT.try_with(|c| c.borrow().clone()).unwrap_or(None)
}

/// Restores the thread's previous context when a [`parked`] scope ends (also by a panic).
struct Restore(Option<Rc<Parked>>);

impl Drop for Restore {
    fn drop(&mut self) {
        swap_current(self.0.take());
    }
}

/// Runs `f` with `ctx` as this thread's context: every wait of `f` goes to its [`Park`]. The
/// park may run other calls on this thread (each in a `parked` scope of its own) before it
/// returns; the context is taken off the thread while it is parked and put back after.
pub fn parked<R>(ctx: &Rc<Parked>, f: impl FnOnce() -> R) -> R {
    let prev = swap_current(Some(Rc::clone(ctx)));
    let _restore = Restore(prev);
    f()
}

/// Counts the descriptors the engine has opened for waiting on: see [`descriptors_opened`].
static OPENED: AtomicU64 = AtomicU64::new(0);

/// Notes that the engine has made a descriptor that a wait may name (a connection's socket, a
/// probe's, a waker's). Called once it exists and before anything can wait on it, so a park
/// that sees the descriptor in a wait sees the count this left.
pub(crate) fn opened() {
    OPENED.fetch_add(1, Ordering::SeqCst);
}

/// A count that changes each time the engine opens a descriptor that a wait may name. A park
/// that remembers descriptors by number between waits (an epoll set it adds each one to once)
/// forgets them when the count has changed since it remembered them: a number it knows may
/// name a new descriptor by now (the old one closed, the number reused), which is not in its
/// set. While the count stands still, every number a wait names is one it has seen open.
pub fn descriptors_opened() -> u64 {
    OPENED.load(Ordering::SeqCst)
}

/// Whether the current call's park defers writes (see [`Park::defers_writes`]).
pub(crate) fn defers_writes() -> bool {
    current().is_some_and(|c| c.park.defers_writes())
}

/// Whether the current call's park defers the writes of a connection's driver too (see
/// [`Park::defers_driver_writes`]).
pub(crate) fn defers_driver_writes() -> bool {
    current().is_some_and(|c| c.park.defers_writes() && c.park.defers_driver_writes())
}

/// Leaves `write` (which writes connection `key`'s buffer) for [`flush_deferred`] when the
/// current call's park defers writes; gives it back otherwise. A connection already listed
/// needs nothing more: its write takes everything buffered.
#[inline(never)]
pub(crate) fn defer(key: usize, write: Box<dyn FnOnce()>) -> Result<(), Box<dyn FnOnce()>> {
    if !current().is_some_and(|c| c.park.defers_writes()) {
        return Err(write);
    }
    let mut write = Some(write);
    let listed = DEFERRED.try_with(|d| {
        let mut d = d.borrow_mut();
        let w = write.take();
        if !d.iter().any(|(k, _)| *k == key) {
            d.extend(w.map(|w| (key, w)));
        }
    });
    match (listed, write) {
        (Err(_), Some(w)) => Err(w),
        _ => Ok(()),
    }
}

/// Writes what the calls of this thread left in their connections' buffers (see
/// [`Park::defers_writes`]). An event loop calls it before it polls.
#[inline(never)]
pub fn flush_deferred() {
    let writes = DEFERRED
        .try_with(|d| std::mem::take(&mut *d.borrow_mut()))
        .unwrap_or_default();
    for (_, write) in writes {
        write();
    }
}

/// Whether this thread runs a call under a [`Park`].
pub(crate) fn is_parked() -> bool {
    current().is_some()
}

/// The current context's slot for a lower layer's per-call state (`None`: no context, the
/// thread's own state applies).
pub(crate) fn slot<R>(
    f: impl FnOnce(&RefCell<Option<Arc<dyn Any + Send + Sync>>>) -> R,
) -> Option<R> {
    let ctx = current()?;
    Some(f(&ctx.slot))
}

/// Waits as `poll(2)` does: until one of `fds` is ready or `timeout` has passed (`None`: no
/// limit). Returns how many are ready; `Interrupted` is the caller's to retry. A zero
/// timeout never parks.
pub(crate) fn poll(fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
    let ctx = match timeout {
        Some(t) if t.is_zero() => None,
        _ => swap_current(None),
    };
    if let Some(ctx) = ctx {
        let r = ctx.park.park(fds, timeout);
        swap_current(Some(ctx));
        return r;
    }
    let ms = timeout.map_or(-1, timeout_ms);
    // SAFETY: `fds` is a live, exclusively borrowed array of `fds.len()` initialised `pollfd`
    // structs; poll(2) writes only their `revents` fields.
    #[allow(unsafe_code)] // the one poll(2) call; see SAFETY above
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Waits `d` (a pause between attempts or re-reads), parking under a context (which may end
/// the pause early: every caller looks again at what it waits for).
pub(crate) fn pause(d: Duration) {
    if d.is_zero() {
        return;
    }
    if is_parked() {
        let _ = poll(&mut [], Some(d));
        return;
    }
    std::thread::sleep(d);
}

/// `remaining` as `poll(2)`'s timeout: whole milliseconds, rounded **up** so that a
/// sub-millisecond remainder never becomes a zero timeout (which would spin), and capped to
/// what a C `int` holds.
pub(crate) fn timeout_ms(remaining: Duration) -> libc::c_int {
    let ms = remaining.as_nanos().div_ceil(1_000_000).max(1);
    ms.min(libc::c_int::MAX as u128) as libc::c_int
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// A park that records each wait and answers it with `poll(2)` with no timeout's worth of
    /// blocking (what an event loop would see, without one).
    struct Recording(Rc<Cell<usize>>);

    impl Park for Recording {
        fn park(&self, fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
            self.0.set(self.0.get() + 1);
            assert!(!is_parked(), "the context is off the thread while parked");
            // SAFETY: as in `poll`.
            #[allow(unsafe_code)]
            let n = unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    timeout.map_or(-1, timeout_ms),
                )
            };
            Ok(n.max(0) as usize)
        }
    }

    #[test]
    fn waits_under_a_context_go_to_its_park_and_zero_timeouts_do_not() {
        let count = Rc::new(Cell::new(0));
        let ctx = Parked::new(Box::new(Recording(Rc::clone(&count))), State::default());
        let (a, b) = UnixStream::pair().unwrap();
        parked(&ctx, || {
            assert!(is_parked());
            let mut fds = [PollFd {
                fd: a.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            assert_eq!(poll(&mut fds, Some(Duration::ZERO)).unwrap(), 0);
            assert_eq!(count.get(), 0);
            std::io::Write::write_all(&mut &b, b"x").unwrap();
            assert_eq!(poll(&mut fds, Some(Duration::from_secs(5))).unwrap(), 1);
            assert_ne!(fds[0].revents & libc::POLLIN, 0);
            assert_eq!(count.get(), 1);
            assert!(is_parked(), "the context is back after the park");
            pause(Duration::from_millis(2));
            assert!(count.get() >= 2);
        });
        assert!(!is_parked());
    }

    #[test]
    fn each_context_has_its_own_slot() {
        let a = Parked::new(Box::new(Recording(Rc::new(Cell::new(0)))), State::default());
        let b = Parked::new(Box::new(Recording(Rc::new(Cell::new(0)))), State::default());
        assert!(slot(|_| ()).is_none());
        parked(&a, || slot(|s| *s.borrow_mut() = Some(Arc::new(1u8))));
        parked(&b, || assert!(slot(|s| s.borrow().is_none()).unwrap()));
        parked(&a, || assert!(slot(|s| s.borrow().is_some()).unwrap()));
        // A finished context's state goes on to the next.
        let c = Parked::new(Box::new(Recording(Rc::new(Cell::new(0)))), a.take_state());
        parked(&c, || assert!(slot(|s| s.borrow().is_some()).unwrap()));
        parked(&a, || assert!(slot(|s| s.borrow().is_none()).unwrap()));
    }
}
