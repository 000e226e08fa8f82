//! A caller's round as the links see it: one slot per node, filled by whoever reads that
//! node's reply, and the waker that tells the caller's thread. One cell per thread serves all
//! its rounds (a thread waits in one round at a time), so a round allocates nothing; a call
//! run under an event loop's park has a cell of its own (park.rs).
//!
//! The links (link.rs) fill the slots and hand a call the role of driver; the quorum engine
//! looks at them and closes them. Wake-ups are gathered while locks are held and sent after
//! (`Wakes`, `wake_all`).

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::NodeOutcome;
use crate::mux::Waker;
use crate::park;
use crate::resp::Reply;

/// One node's part in a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    /// No answer yet.
    Waiting,
    /// The node answered, `latency` after the command was written; `acks`: how many replicas
    /// the `WAIT` written behind it counted (only where one was).
    Reply {
        reply: Reply,
        latency: Duration,
        acks: Option<u64>,
    },
    /// The node did not answer; why.
    Failed(NodeOutcome),
}

/// A thread's call cell: its waker, and the slots of its current round. A thread waits in
/// one round at a time, so one cell per thread serves all its rounds: nothing is allocated per
/// round, and nothing allocated by one thread is freed by another (which costs a contended
/// allocator lock when many threads share the links).
pub(super) struct Cell {
    pub(super) waker: Arc<Waker>,
    inner: Mutex<CallInner>,
}

struct CallInner {
    /// The round the slots belong to: a stale [`Call`] handle (an entry of an earlier round
    /// of this thread) fills nothing.
    round: u64,
    /// Set when the caller stops waiting: nothing is delivered after that.
    closed: bool,
    slots: Vec<Slot>,
    /// Links handed to this call to drive, not yet taken up by its loop.
    handed: Vec<usize>,
}

/// One caller's round: a slot per node, filled by whoever reads the node's reply. A cheap
/// handle (the thread's cell and the round's number); entries of the links hold copies.
///
/// A round that writes a node several commands, on several links (a cluster node's request
/// split by slot), gives each command a slot of its own: the handle an entry holds then names
/// it ([`at`](Self::at)), and the link fills that slot rather than its node's.
#[derive(Clone)]
pub(crate) struct Call {
    pub(super) cell: Arc<Cell>,
    pub(super) round: u64,
    /// The slot this handle's replies fill; `None`: the one of the link's node.
    target: Option<usize>,
}

static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static CELL: RefCell<Option<Arc<Cell>>> = const { RefCell::new(None) };
}

// Never inlined: see park.rs (a parked call may go on on another thread).
#[inline(never)]
fn thread_cell() -> io::Result<Arc<Cell>> {
    // A call run under an event loop's park has a cell of its own: other calls run on its
    // thread while it is parked (see park.rs).
    if let Some(c) = park::slot(|slot| {
        let mut slot = slot.borrow_mut();
        if let Some(c) = slot
            .as_ref()
            .and_then(|c| Arc::clone(c).downcast::<Cell>().ok())
        {
            return Ok(c);
        }
        let new = new_cell()?;
        *slot = Some(Arc::clone(&new) as _);
        Ok(new)
    }) {
        return c;
    }
    CELL.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(c) = c.as_ref() {
            return Ok(Arc::clone(c));
        }
        let new = new_cell()?;
        *c = Some(Arc::clone(&new));
        Ok(new)
    })
}

fn new_cell() -> io::Result<Arc<Cell>> {
    Ok(Arc::new(Cell {
        waker: Arc::new(Waker::new()?),
        inner: Mutex::new(CallInner {
            round: 0,
            closed: true,
            slots: Vec::new(),
            handed: Vec::new(),
        }),
    }))
}

/// This thread's waker: the one its rounds are woken through, and the one it sleeps on while
/// it waits for a release (a wake-up meant for one is harmless to the other: both look again).
pub(crate) fn thread_waker() -> io::Result<Arc<Waker>> {
    Ok(Arc::clone(&thread_cell()?.waker))
}

impl Call {
    /// A new round of this thread over `nodes` nodes, every slot waiting, woken through this
    /// thread's waker.
    pub(crate) fn new(nodes: usize) -> io::Result<Call> {
        let cell = thread_cell()?;
        let round = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
        {
            let mut c = cell.inner.lock().unwrap_or_else(|p| p.into_inner());
            c.round = round;
            c.closed = false;
            c.slots.clear();
            c.slots.resize(nodes, Slot::Waiting);
            c.handed.clear();
        }
        Ok(Call {
            cell,
            round,
            target: None,
        })
    }

    /// This round's handle for the command whose reply fills slot `t`.
    pub(crate) fn at(&self, t: usize) -> Call {
        Call {
            cell: Arc::clone(&self.cell),
            round: self.round,
            target: Some(t),
        }
    }

    /// The slot this handle's reply fills, on the link of node `node`.
    pub(crate) fn slot_for(&self, node: usize) -> usize {
        self.target.unwrap_or(node)
    }

    /// The cell's state, if it still belongs to this round.
    fn lock(&self) -> Option<MutexGuard<'_, CallInner>> {
        let c = self.cell.inner.lock().unwrap_or_else(|p| p.into_inner());
        (c.round == self.round).then_some(c)
    }

    /// This call's identity (unique in the process).
    pub(crate) fn id(&self) -> u64 {
        self.round
    }

    /// The descriptor that wakes this call's thread.
    pub(crate) fn waker(&self) -> &Waker {
        &self.cell.waker
    }

    /// A handle on [`waker`](Self::waker), for a thread that keeps it.
    pub(crate) fn waker_arc(&self) -> Arc<Waker> {
        Arc::clone(&self.cell.waker)
    }

    /// Fills slot `i` if it is still waiting and the call still listens; true if it did.
    pub(crate) fn fill(&self, i: usize, slot: Slot) -> bool {
        let Some(mut c) = self.lock() else {
            return false;
        };
        if c.closed || c.slots[i] != Slot::Waiting {
            return false;
        }
        c.slots[i] = slot;
        true
    }

    /// Sets slot `i`, whatever it holds, unless the call has stopped listening (the owner of
    /// a round that follows a redirect: back to waiting, or failed); true if it did.
    pub(crate) fn refill(&self, i: usize, slot: Slot) -> bool {
        let Some(mut c) = self.lock() else {
            return false;
        };
        if c.closed {
            return false;
        }
        c.slots[i] = slot;
        true
    }

    /// Runs `f` over the slots, and takes the links handed to this call since the last look.
    pub(crate) fn look<R>(&self, f: impl FnOnce(&[Slot], Vec<usize>) -> R) -> R {
        let mut c = self
            .lock()
            .expect("the owner of a round looks at its own round");
        let handed = std::mem::take(&mut c.handed);
        f(&c.slots, handed)
    }

    /// Stops listening: returns the slots, and the links handed to this call that its loop
    /// had not taken up (it must hand them on).
    pub(crate) fn close(&self) -> (Vec<Slot>, Vec<usize>) {
        let mut c = self
            .lock()
            .expect("the owner of a round closes its own round");
        c.closed = true;
        (std::mem::take(&mut c.slots), std::mem::take(&mut c.handed))
    }

    /// Accepts the role of driver of link `i`, unless the call has stopped listening.
    pub(super) fn hand(&self, i: usize) -> bool {
        let Some(mut c) = self.lock() else {
            return false;
        };
        if c.closed {
            return false;
        }
        c.handed.push(i);
        true
    }
}

/// Wake-ups to send once every lock is released: (call id, waker). A caller that does I/O
/// on several links gathers them and sends each call at most one per `poll(2)` round.
pub(crate) type Wakes = Vec<(u64, Arc<Waker>)>;

/// Adds `c`'s wake-up to `w`.
pub(super) fn wake_later(w: &mut Wakes, c: &Call) {
    w.push((c.round, Arc::clone(&c.cell.waker)));
}

/// Sends the gathered wake-ups, one per call, except to `except` (the caller itself).
pub(crate) fn wake_all(wakes: &mut Wakes, except: u64) {
    let mut done: Vec<u64> = Vec::new();
    for (id, w) in wakes.drain(..) {
        if id != except && !done.contains(&id) {
            done.push(id);
            w.wake();
        }
    }
}
