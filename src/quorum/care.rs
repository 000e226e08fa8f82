//! The caretaker: one background thread per process that drives connections nobody is
//! waiting on but that still have work in progress.
//!
//! A round returns as soon as a quorum has decided. A slower node's connection may then be
//! new and still in its handshake, with the round's command held behind it (a command never
//! runs before `AUTH` and `SELECT` succeeded), or hold output its socket has not taken yet.
//! Nobody is left to read that connection, so without help its commands would be written only
//! at the next round on that node, however late: a `SET … PX ttl` written a minute late would
//! hold that node's key for a full TTL from then. The round hands such a link to the
//! caretaker, which drives it like any caller would (reading the handshake's replies, writing
//! what was held, discarding the replies nobody waits for) until the link needs nothing more,
//! or for at most the stale limit; then it lets go. Callers that come meanwhile are served by
//! it and take the link over when it leaves.
//!
//! When a manager's nodes are dropped (the manager and every lease it made are gone), each
//! connection that still owes replies is handed over too, and read to the end before it is
//! closed ([`Link::drain`]): programs drop the manager as soon as an unlock returns at quorum,
//! and closing the slower node's connection then may lose the unlock, leaving that node's key
//! for its TTL: a `NOSCRIPT` answered after the close never gets its `EVAL` (tests/lock.rs),
//! and, as seen under load though not traced inside the server, a node whose client closed
//! with replies unread may free it before running the commands it had not read yet.
//!
//! It is started on first use and sleeps in `poll(2)` on its waker when it has nothing to do.
//! It holds the links it was handed (strongly, for the drain above), until it lets go: the
//! stale limit at most.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::mux::{self, Interest, Readiness, Source, Waker};
use crate::node::call::{Wakes, wake_all};
use crate::node::{Call, ConnSettings, Link};
use crate::timing::{Clock, SystemClock};

/// A manager's nodes are dropped (the manager and every lease it made are gone): every
/// connection that still owes replies is read to the end by the caretaker before it is closed
/// (see [`Link::drain`]), the stale limit at most.
impl Drop for super::Cluster {
    fn drop(&mut self) {
        for link in self.all_links() {
            if link.drain() {
                care(&link, &self.settings);
            }
        }
    }
}

/// One link handed over, and with which settings.
struct Job {
    link: Arc<Link>,
    settings: ConnSettings,
}

struct Caretaker {
    jobs: Mutex<Vec<Job>>,
    /// The caretaker thread's waker, once it runs.
    waker: OnceLock<Arc<Waker>>,
    /// False when its thread could not be started: links are then not kept for it.
    running: bool,
}

static CARETAKER: OnceLock<Caretaker> = OnceLock::new();

/// Hands `link` to the caretaker, starting it if needed. If the thread cannot be started, the
/// link simply waits for the next round on that node.
pub(super) fn care(link: &Arc<Link>, settings: &ConnSettings) {
    let c = CARETAKER.get_or_init(|| {
        let started = std::thread::Builder::new()
            .name("redlock-caretaker".into())
            .spawn(run);
        if let Err(e) = &started {
            log::warn!("cannot start the caretaker thread: {e}");
        }
        Caretaker {
            jobs: Mutex::new(Vec::new()),
            waker: OnceLock::new(),
            running: started.is_ok(),
        }
    });
    if !c.running {
        return;
    }
    c.jobs.lock().unwrap_or_else(|p| p.into_inner()).push(Job {
        link: Arc::clone(link),
        settings: settings.clone(),
    });
    if let Some(w) = c.waker.get() {
        w.wake();
    }
}

/// A link the caretaker drives, until its deadline at the latest.
struct Tended {
    link: Arc<Link>,
    settings: ConnSettings,
    until: Instant,
    call: Call,
    done: bool,
}

impl Source for Tended {
    fn interest(&self) -> Option<(std::os::fd::RawFd, Interest)> {
        if self.done {
            return None;
        }
        self.link.interest(&self.call)
    }

    fn deadline(&self) -> Option<Instant> {
        (!self.done).then_some(self.until)
    }

    fn on_ready(&mut self, ready: Readiness, now: Instant) {
        let link = &self.link;
        let mut wakes = Wakes::new();
        link.on_ready(ready, now, &self.settings, &mut wakes);
        wake_all(&mut wakes, self.call.id());
        if !link.is_driven_by(&self.call) || !link.wants_care() {
            self.finish();
        }
    }

    fn on_deadline(&mut self, _: Instant) {
        self.finish();
    }
}

impl Tended {
    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            // Hands the link to a caller that came meanwhile, if any.
            self.link.leave(&self.call);
        }
    }
}

/// The caretaker thread.
fn run() {
    let Ok(call) = Call::new(0) else { return };
    let c = loop {
        // `care` initialises CARETAKER before this thread can look at it.
        if let Some(c) = CARETAKER.get() {
            break c;
        }
        std::thread::yield_now();
    };
    // The call's waker is also the one the links wake when a tended connection fails.
    let waker = call.waker_arc();
    let _ = c.waker.set(Arc::clone(&waker));
    let clock = SystemClock;
    let mut tended: Vec<Tended> = Vec::new();
    loop {
        let now = clock.now();
        let jobs = std::mem::take(&mut *c.jobs.lock().unwrap_or_else(|p| p.into_inner()));
        for job in jobs {
            let link = job.link;
            if link.adopt(&call) {
                tended.push(Tended {
                    until: now + job.settings.stale_limit,
                    link,
                    settings: job.settings,
                    call: call.clone(),
                    done: false,
                });
            }
        }
        tended.retain(|t| !t.done);
        let mut sources: Vec<Wake<'_>> = tended.iter_mut().map(Wake::Link).collect();
        let tending = !sources.is_empty();
        // Nothing to tend: sleep until a job comes (a long deadline keeps `drive` waiting).
        sources.push(Wake::Waker {
            waker: &waker,
            until: now + Duration::from_secs(3600),
            fired: false,
        });
        let _ = mux::drive(&mut sources, &|| clock.now(), |s| {
            // Back to the top when a job came (the waker fired) or every link is done.
            s.iter()
                .any(|w| matches!(w, Wake::Waker { fired: true, .. }))
                || (tending && s.iter().all(Wake::idle))
        });
    }
}

/// The caretaker's sources: tended links, and its waker.
enum Wake<'a> {
    Link(&'a mut Tended),
    Waker {
        waker: &'a Waker,
        until: Instant,
        fired: bool,
    },
}

impl Wake<'_> {
    /// True for a tended link that is done, and for the waker.
    fn idle(&self) -> bool {
        match self {
            Wake::Link(t) => t.done,
            Wake::Waker { .. } => true,
        }
    }
}

impl Source for Wake<'_> {
    fn interest(&self) -> Option<(std::os::fd::RawFd, Interest)> {
        match self {
            Wake::Link(t) => t.interest(),
            Wake::Waker { waker, .. } => Some((
                waker.fd(),
                Interest {
                    read: true,
                    write: false,
                },
            )),
        }
    }

    fn deadline(&self) -> Option<Instant> {
        match self {
            Wake::Link(t) => t.deadline(),
            Wake::Waker { until, fired, .. } => (!*fired).then_some(*until),
        }
    }

    fn on_ready(&mut self, ready: Readiness, now: Instant) {
        match self {
            Wake::Link(t) => t.on_ready(ready, now),
            Wake::Waker { waker, fired, .. } => {
                waker.drain();
                *fired = true;
            }
        }
        let _ = now;
    }

    fn on_deadline(&mut self, now: Instant) {
        match self {
            Wake::Link(t) => t.on_deadline(now),
            Wake::Waker { fired, .. } => *fired = true,
        }
    }
}
