//! Poor man's multiplexing: wait on many sockets at once against fixed deadlines.
//!
//! Every wait goes through `park::poll` (`poll(2)`, or an event loop's park). It knows file
//! descriptors, readiness and deadlines; it never sees a Redis command. Each source keeps its
//! own per-step state; the caller decides when the step is over (a quorum reached or no longer
//! possible) through `decided`. A [`Waker`] lets another thread interrupt a wait: it is one
//! more descriptor in the same wait, so a thread never blocks on anything else.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::park;

/// What a source waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interest {
    pub read: bool,
    pub write: bool,
}

/// What `poll(2)` reported for a source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Readiness {
    pub readable: bool,
    pub writable: bool,
    /// `POLLERR`, `POLLHUP` or `POLLNVAL`: the source should read to find out what happened.
    pub error: bool,
}

/// One participant in a step.
pub(crate) trait Source {
    /// The descriptor and what to wait for, or `None` when this source has no descriptor to
    /// watch now (answered, failed, or waiting for another thread to wake the step).
    fn interest(&self) -> Option<(RawFd, Interest)>;
    /// A second descriptor to watch for a while (a connection's probe), if any: its
    /// readiness is reported through [`on_ready`](Self::on_ready) too, for the source to find
    /// out which moved. Defaults to none.
    fn second(&self) -> Option<(RawFd, Interest)> {
        None
    }
    /// When this source gives up, or `None` once it waits for nothing (it may still have an
    /// interest: a descriptor it serves for others). Fixed for the whole step, except that a
    /// source may ask for [`on_deadline`](Self::on_deadline) sooner, to do something at that
    /// time, and then name a later deadline.
    fn deadline(&self) -> Option<Instant>;
    /// Called when `poll` reported readiness; the source does its non-blocking I/O.
    fn on_ready(&mut self, ready: Readiness, now: Instant);
    /// Called once its deadline has passed while it still had one.
    fn on_deadline(&mut self, now: Instant);
}

#[cfg(test)]
use crate::park::timeout_ms;

/// Drives `sources` until `decided` returns true or no source has a deadline left.
///
/// The remaining time is recomputed from each source's fixed deadline after every wake-up, so
/// interrupted or partial waits never extend a step. `EINTR` is retried. `decided` may update
/// the sources (it runs before every wait).
pub(crate) fn drive<S: Source>(
    sources: &mut [S],
    now: &dyn Fn() -> Instant,
    mut decided: impl FnMut(&mut [S]) -> bool,
) -> io::Result<()> {
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(sources.len());
    // Parallel to `fds`: which source each descriptor belongs to.
    let mut owner: Vec<usize> = Vec::with_capacity(sources.len());
    loop {
        if decided(sources) {
            return Ok(());
        }
        let t = now();
        fds.clear();
        owner.clear();
        let mut expired = false;
        let mut earliest: Option<Instant> = None;
        for (i, s) in sources.iter_mut().enumerate() {
            if let Some(deadline) = s.deadline() {
                if deadline <= t {
                    s.on_deadline(t);
                    expired = true;
                    continue;
                }
                earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
            }
            for (fd, interest) in s.interest().into_iter().chain(s.second()) {
                fds.push(pollfd(fd, interest));
                owner.push(i);
            }
        }
        if expired {
            // An expiry may have decided the step; ask again before waiting.
            continue;
        }
        let Some(earliest) = earliest else {
            return Ok(());
        };
        let n = match park::poll(&mut fds, Some(earliest.saturating_duration_since(t))) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            continue;
        }
        let t = now();
        for (pfd, &i) in fds.iter().zip(owner.iter()) {
            if pfd.revents != 0 {
                sources[i].on_ready(readiness(pfd.revents), t);
            }
        }
    }
}

fn pollfd(fd: RawFd, interest: Interest) -> libc::pollfd {
    let mut events = 0;
    if interest.read {
        events |= libc::POLLIN;
    }
    if interest.write {
        events |= libc::POLLOUT;
    }
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn readiness(r: libc::c_short) -> Readiness {
    Readiness {
        readable: r & libc::POLLIN != 0,
        writable: r & libc::POLLOUT != 0,
        error: r & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0,
    }
}

/// Interrupts another thread's [`drive`]: a connected pair of non-blocking Unix sockets whose
/// reading end is one of the descriptors that thread polls. Waking writes a byte (a wake-up
/// that is already pending is enough, so a full buffer is fine); the woken thread drains it.
///
/// A wake-up pending since the last [`drain`](Self::drain) writes nothing more: a driver that
/// hands one caller its replies from five nodes wakes it with one system call, not five.
pub(crate) struct Waker {
    rx: UnixStream,
    tx: UnixStream,
    /// Set by the wake-up that wrote a byte not yet drained; cleared by `drain` after it has
    /// read. A wake-up that finds it set relies on that byte (or on the drain's reader, who
    /// looks again at what it waits for after clearing it).
    pending: AtomicBool,
}

impl Waker {
    pub(crate) fn new() -> io::Result<Waker> {
        let (rx, tx) = UnixStream::pair()?;
        park::opened();
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok(Waker {
            rx,
            tx,
            pending: AtomicBool::new(false),
        })
    }

    /// The descriptor to poll for reading.
    pub(crate) fn fd(&self) -> RawFd {
        self.rx.as_raw_fd()
    }

    /// Wakes the thread polling [`fd`](Self::fd) (or makes its next poll return at once).
    pub(crate) fn wake(&self) {
        // Whatever the woken thread is to find was written before this (under its own lock);
        // the release pairs with the acquire in `drain`.
        if self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        loop {
            match (&self.tx).write(&[1]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Ok, or WouldBlock (wake-ups already pending), or an error nobody can act on.
                _ => return,
            }
        }
    }

    /// Consumes pending wake-ups. The caller then looks at what it waits for: a wake-up that
    /// came before the flag was cleared wrote nothing, and what it announced is visible now.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            match (&self.rx).read(&mut buf) {
                Ok(n) if n == buf.len() => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                _ => break,
            }
        }
        // Cleared only after reading: cleared first, a byte written in between could be read
        // here and leave the flag set with nothing to wake the next poll.
        self.pending.swap(false, Ordering::AcqRel);
    }
}

/// Checks idle connections in one zero-timeout `poll(2)`: returns, for each descriptor,
/// whether it reports anything (readable, hung up or in error). A connection that owes no reply
/// has nothing to say, so any event means the peer closed it (a restarted node) or sent
/// something unasked: either way it must not carry a command.
pub(crate) fn probe_idle(fds: &[RawFd]) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        match park::poll(&mut pfds, Some(Duration::ZERO)) {
            Ok(_) => return Ok(pfds.iter().map(|p| p.revents != 0).collect()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// One `poll(2)` over `watch`, waiting at most `timeout` (`None`: until something happens).
/// Returns each descriptor's readiness, in order; an interrupted wait returns no readiness
/// (the caller looks again, as it would after any wake-up).
pub(crate) fn poll_once(
    watch: &[(RawFd, Interest)],
    timeout: Option<Duration>,
) -> io::Result<Vec<Readiness>> {
    let mut pfds: Vec<libc::pollfd> = watch.iter().map(|&(fd, i)| pollfd(fd, i)).collect();
    if let Err(e) = park::poll(&mut pfds, timeout) {
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![Readiness::default(); watch.len()]);
        }
        return Err(e);
    }
    Ok(pfds.iter().map(|p| readiness(p.revents)).collect())
}

/// Sleeps until `waker` is woken or `timeout` has passed (`None`: no limit), and consumes its
/// wake-ups. True when woken. A wake-up meant for something else also ends the sleep: callers
/// check what they wait for in a loop.
pub(crate) fn sleep(waker: &Waker, timeout: Option<Duration>) -> io::Result<bool> {
    let read = Interest {
        read: true,
        write: false,
    };
    let r = poll_once(&[(waker.fd(), read)], timeout)?;
    let woken = r[0].readable || r[0].error;
    if woken {
        waker.drain();
    }
    Ok(woken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{Clock, SystemClock};
    use std::thread;

    #[test]
    fn sub_millisecond_waits_round_up() {
        assert_eq!(timeout_ms(Duration::ZERO), 1);
        assert_eq!(timeout_ms(Duration::from_micros(1)), 1);
        assert_eq!(timeout_ms(Duration::from_micros(999)), 1);
        assert_eq!(timeout_ms(Duration::from_micros(1000)), 1);
        assert_eq!(timeout_ms(Duration::from_micros(1001)), 2);
        assert_eq!(timeout_ms(Duration::from_secs(10)), 10_000);
        assert_eq!(timeout_ms(Duration::from_secs(u64::MAX)), libc::c_int::MAX);
    }

    /// Expects one byte from its peer.
    struct OneByte {
        sock: UnixStream,
        deadline: Instant,
        got: Option<u8>,
        timed_out_at: Option<Instant>,
    }

    impl Source for OneByte {
        fn interest(&self) -> Option<(RawFd, Interest)> {
            if self.got.is_some() || self.timed_out_at.is_some() {
                return None;
            }
            Some((
                self.sock.as_raw_fd(),
                Interest {
                    read: true,
                    write: false,
                },
            ))
        }
        fn deadline(&self) -> Option<Instant> {
            (self.got.is_none() && self.timed_out_at.is_none()).then_some(self.deadline)
        }
        fn on_ready(&mut self, _: Readiness, _: Instant) {
            let mut b = [0u8; 1];
            if let Ok(1) = (&self.sock).read(&mut b) {
                self.got = Some(b[0]);
            }
        }
        fn on_deadline(&mut self, now: Instant) {
            self.timed_out_at = Some(now);
        }
    }

    fn pair(deadline: Instant) -> (OneByte, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        (
            OneByte {
                sock: a,
                deadline,
                got: None,
                timed_out_at: None,
            },
            b,
        )
    }

    #[test]
    fn prompt_late_and_silent_peers() {
        let start = SystemClock.now();
        let deadline = start + Duration::from_millis(150);
        let (s0, mut p0) = pair(deadline);
        let (s1, p1) = pair(deadline);
        let (s2, _p2) = pair(deadline);
        p0.write_all(b"a").unwrap();
        let late = thread::spawn(move || {
            thread::sleep(Duration::from_millis(40));
            (&p1).write_all(b"b").unwrap();
            p1
        });
        let mut sources = [s0, s1, s2];
        drive(&mut sources, &|| SystemClock.now(), |_| false).unwrap();
        let _p1 = late.join().unwrap();
        assert_eq!(sources[0].got, Some(b'a'));
        assert_eq!(sources[1].got, Some(b'b'));
        assert_eq!(sources[2].got, None);
        let t = sources[2].timed_out_at.expect("silent peer times out");
        // Never before the deadline, and not long after it.
        assert!(t >= deadline);
        assert!(
            t < deadline + Duration::from_millis(100),
            "{:?}",
            t - deadline
        );
    }

    #[test]
    fn returns_as_soon_as_decided() {
        let start = SystemClock.now();
        let deadline = start + Duration::from_secs(5);
        let (s0, mut p0) = pair(deadline);
        let (s1, mut p1) = pair(deadline);
        let (s2, _silent) = pair(deadline);
        p0.write_all(b"x").unwrap();
        p1.write_all(b"y").unwrap();
        let mut sources = [s0, s1, s2];
        drive(&mut sources, &|| SystemClock.now(), |s| {
            s.iter().filter(|s| s.got.is_some()).count() >= 2
        })
        .unwrap();
        assert!(start.elapsed() < Duration::from_millis(2500));
        assert!(sources[2].got.is_none() && sources[2].timed_out_at.is_none());
    }

    #[test]
    fn probe_flags_closed_and_chatty_peers_only() {
        let (quiet, _q) = UnixStream::pair().unwrap();
        let (closed, c) = UnixStream::pair().unwrap();
        let (chatty, mut h) = UnixStream::pair().unwrap();
        drop(c);
        h.write_all(b"+OK\r\n").unwrap();
        let flags =
            probe_idle(&[quiet.as_raw_fd(), closed.as_raw_fd(), chatty.as_raw_fd()]).unwrap();
        assert_eq!(flags, vec![false, true, true]);
        assert!(probe_idle(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_waker_interrupts_a_wait_from_another_thread() {
        let w = std::sync::Arc::new(Waker::new().unwrap());
        struct Woken(std::sync::Arc<Waker>, bool, Instant);
        impl Source for Woken {
            fn interest(&self) -> Option<(RawFd, Interest)> {
                (!self.1).then_some((
                    self.0.fd(),
                    Interest {
                        read: true,
                        write: false,
                    },
                ))
            }
            fn deadline(&self) -> Option<Instant> {
                (!self.1).then_some(self.2)
            }
            fn on_ready(&mut self, _: Readiness, _: Instant) {
                self.0.drain();
                self.1 = true;
            }
            fn on_deadline(&mut self, _: Instant) {
                self.1 = true;
            }
        }
        // Woken from another thread in the middle of a wait.
        let start = SystemClock.now();
        let w2 = std::sync::Arc::clone(&w);
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            w2.wake();
        });
        let far = start + Duration::from_secs(10);
        let mut s = [Woken(std::sync::Arc::clone(&w), false, far)];
        drive(&mut s, &|| SystemClock.now(), |s| s[0].1).unwrap();
        t.join().unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        // Two wake-ups pending: one wait returns at once and drains both, so the next wait
        // runs to its deadline.
        w.wake();
        w.wake();
        let mut s = [Woken(std::sync::Arc::clone(&w), false, far)];
        drive(&mut s, &|| SystemClock.now(), |s| s[0].1).unwrap();
        let before = SystemClock.now();
        let soon = before + Duration::from_millis(30);
        let mut s = [Woken(w, false, soon)];
        drive(&mut s, &|| SystemClock.now(), |s| s[0].1).unwrap();
        assert!(before.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_new_waker_is_counted_as_opened() {
        // See `park::descriptors_opened`: other tests open descriptors too, the count only
        // grows.
        let before = park::descriptors_opened();
        let _w = Waker::new().unwrap();
        assert!(park::descriptors_opened() > before);
    }

    #[test]
    fn wake_ups_pending_together_write_one_byte_and_none_is_lost_after_a_drain() {
        let w = Waker::new().unwrap();
        for _ in 0..5 {
            w.wake();
        }
        let mut buf = [0u8; 64];
        assert_eq!(
            (&w.rx).read(&mut buf).unwrap(),
            1,
            "one byte for five wake-ups"
        );
        // Read by hand, not drained: the flag still says a byte is on its way, so the next
        // wake-up writes nothing. `drain` clears it; the next one writes again.
        w.wake();
        assert!(
            (&w.rx).read(&mut buf).is_err(),
            "nothing written while pending"
        );
        w.drain();
        w.wake();
        assert_eq!((&w.rx).read(&mut buf).unwrap(), 1);
        w.drain();

        // Two threads hand the turn back and forth through two wakers: a wake-up lost between
        // a drain and the next wait leaves one of them asleep until its 10 s limit.
        let a = std::sync::Arc::new(Waker::new().unwrap());
        let b = std::sync::Arc::new(Waker::new().unwrap());
        let (a2, b2) = (std::sync::Arc::clone(&a), std::sync::Arc::clone(&b));
        let limit = Some(Duration::from_secs(10));
        let t = thread::spawn(move || {
            for i in 0..2000 {
                assert!(
                    sleep(&b2, limit).unwrap(),
                    "turn {i} never reached the helper"
                );
                a2.wake();
            }
        });
        for i in 0..2000 {
            b.wake();
            assert!(sleep(&a, limit).unwrap(), "turn {i} never came back");
        }
        t.join().unwrap();
    }

    #[test]
    fn nothing_to_wait_for_returns_at_once() {
        let mut none: [OneByte; 0] = [];
        drive(&mut none, &|| SystemClock.now(), |_| false).unwrap();
    }

    #[test]
    fn sleep_ends_on_a_wake_up_or_the_timeout() {
        let w = std::sync::Arc::new(Waker::new().unwrap());
        let t0 = Instant::now();
        assert!(!sleep(&w, Some(Duration::from_millis(20))).unwrap());
        assert!(t0.elapsed() >= Duration::from_millis(20));
        // A wake-up sent before the sleep is not lost.
        w.wake();
        assert!(sleep(&w, Some(Duration::from_secs(30))).unwrap());
        let w2 = std::sync::Arc::clone(&w);
        let t = thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            w2.wake();
        });
        assert!(sleep(&w, None).unwrap());
        t.join().unwrap();
        // Drained: the next sleep times out.
        assert!(!sleep(&w, Some(Duration::from_millis(1))).unwrap());
    }
}
