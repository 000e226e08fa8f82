//! The link to one node: one connection shared by every caller of a manager, and the
//! bookkeeping that gives each caller its own reply.
//!
//! Callers of one manager write their commands to the same connection per node. Redis answers
//! the commands of one connection in order, so the link keeps a first-in, first-out queue of
//! *entries*, one per command written: the next reply belongs to the first entry. An entry
//! names the [`Call`] (one caller's round) waiting for it, or nobody: a command sent without
//! waiting (a release after a failed attempt), or whose caller stopped waiting (its round was
//! decided at quorum, or its deadline passed). Replies for nobody are read and discarded, so a
//! late reply can never be taken for the answer to a later command.
//!
//! One shared connection also orders every command about a key on each node: an unlock sent
//! after an acquisition that returned at quorum runs after that acquisition's `SET` on the
//! slow node too, whichever thread sends it.
//!
//! **Who reads.** At any time at most one call *drives* a link: it has the link's socket in its
//! own `poll(2)`, reads every reply that arrives and hands each to the call it belongs to,
//! waking that call through its [`Waker`]. The first call that writes to an undriven link
//! drives it; a call that leaves while others still wait hands the role to the first of them.
//! A lone caller therefore reads its own replies with no hand-over at all, and concurrent
//! callers share one read (and, on the server, one read of their pipelined commands) per node.
//! Reading is done under the link's lock, so any caller may also read what has arrived before
//! it declares a node timed out, which keeps a slow driver from turning into false timeouts.
//!
//! Locks are taken in one order: a link's, then a call's. Wake-ups are sent after both are
//! released.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::call::{Call, Slot, Wakes, wake_all, wake_later};
use super::conn::{self, Conn, unreachable_from};
pub(crate) use super::entry::{Combine, Expect};
use super::entry::{Entry, Purpose, Redirected, Resend, stale};
use super::health::{self, ConnSettings, Discovery, Hs, Node};
use crate::error::NodeOutcome;
use crate::mux::{Interest, Readiness, Waker};
use crate::park;
use crate::resp::{ReadError, Reply};

mod care;
mod connect;
mod reply;
mod shards;

pub(crate) use shards::{MakeShard, Shards};

/// How long a connection must have been idle before a caller checks, before using it, whether
/// the node closed it. In a tight loop the check would cost a system call per step for
/// nothing; a node that restarts within this window is simply failed for one step.
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(5);

/// The work the commands a connection owes replies to may take the server: how much longer
/// than the stale limit it may stay silent.
fn owed_work(st: &State) -> Duration {
    st.pending
        .iter()
        .fold(Duration::ZERO, |a, e| a.saturating_add(e.work))
}

struct Driver {
    call: u64,
    waker: Arc<Waker>,
}

struct State {
    conn: Option<Conn>,
    /// Bumped whenever `conn` is replaced, so that a probe cannot close a newer connection.
    generation: u64,
    /// One entry per command written or queued on `conn`, in order.
    pending: VecDeque<Entry>,
    /// The replies read so far for the first entry, when it is one of several parts
    /// ([`Expect::Parts`]); empty otherwise. Reused, so a round allocates nothing here.
    parts: Vec<Reply>,
    driver: Option<Driver>,
    /// When the connection last carried a command or a reply.
    last_used: Instant,
    /// When the connection last delivered a reply: a node that answers is not hung, however
    /// far behind its queue (see [`stale`]).
    last_reply: Instant,
    /// The reply of the first entry, when that entry waits for its `WAIT`'s reply too.
    acked: Option<Reply>,
    /// For a failover group: the search for its master in progress (`conn` is then the
    /// connection to the sentinel being asked, and holds the commands written meanwhile).
    discovery: Option<Discovery>,
    /// The `ASKING` replies read so far for the first entry, when it was asked (see
    /// `Purpose::Command`): one comes before each of its own replies.
    asked_oks: usize,
    /// Its manager is gone: the connection is read until it owes nothing (see
    /// [`Link::drain`]).
    draining: bool,
    /// The thread whose event loop is to write this connection's buffer (`defer_flush`), until
    /// it does. The call that drives the connection on that thread does not poll for output
    /// meanwhile: its wake-up would write the commands of the turn before the rest of them.
    deferred_on: Option<std::thread::ThreadId>,
}

/// What [`Link::submit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Submitted {
    /// The caller drives the link now.
    pub drive: bool,
    /// The connection is still being set up: the reply may take a connect longer.
    pub starting: bool,
}

/// The link to one node.
pub(crate) struct Link {
    pub(crate) node: Node,
    state: Mutex<State>,
    /// For a cluster node: its shards, each with a link of its own (this link's connection is
    /// then never used).
    pub(crate) shards: Option<Shards>,
    /// For a shard's link: where its redirects nobody follows go (its cluster node's queue).
    pub(crate) redirected: Option<Arc<Mutex<Vec<Redirected>>>>,
}

impl Link {
    pub(crate) fn new(node: Node, now: Instant) -> Link {
        Link {
            node,
            state: Mutex::new(State {
                conn: None,
                generation: 0,
                pending: VecDeque::new(),
                parts: Vec::new(),
                driver: None,
                last_used: now,
                last_reply: now,
                acked: None,
                discovery: None,
                asked_oks: 0,
                draining: false,
                deferred_on: None,
            }),
            shards: None,
            redirected: None,
        }
    }

    /// The link of a cluster node: `node` stands for the whole cluster in reports, `shards`
    /// serve its keys.
    pub(crate) fn cluster(node: Node, shards: Shards, now: Instant) -> Link {
        Link {
            shards: Some(shards),
            ..Link::new(node, now)
        }
    }

    /// Reads what has arrived for entries nobody is reading, if nobody drives the link (a
    /// cluster node's shard, before its queued redirects are followed: replies to commands
    /// sent without waiting may be there).
    pub(crate) fn read_orphans(&self, now: Instant, settings: &ConnSettings) {
        let mut wakes = Wakes::new();
        {
            let mut st = self.lock();
            if st.driver.is_none() && !st.pending.is_empty() {
                self.settle(&mut st, now, settings, &mut wakes);
            }
        }
        wake_all(&mut wakes, 0);
    }

    /// True while the link has a connection (possibly still in its handshake).
    pub(crate) fn has_conn(&self) -> bool {
        self.lock().conn.is_some()
    }

    /// A link over an existing connection (tests use socket pairs).
    #[cfg(test)]
    pub(crate) fn with_conn(node: Node, conn: Conn, now: Instant) -> Link {
        let l = Link::new(node, now);
        l.lock().conn = Some(conn);
        l
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection's descriptor and generation if it has been idle (nothing owed) for
    /// longer than [`PROBE_AFTER`]: a candidate for [`mux::probe_idle`](crate::mux::probe_idle).
    pub(crate) fn idle_fd(&self, now: Instant) -> Option<(RawFd, u64)> {
        let st = self.lock();
        let c = st.conn.as_ref()?;
        (st.pending.is_empty()
            && !c.is_starting()
            && now.saturating_duration_since(st.last_used) > PROBE_AFTER)
            .then(|| (c.fd(), st.generation))
    }

    /// Closes connection `generation` if it is still the link's and still idle: the probe
    /// found it closed by the node (a restart) or carrying something nobody asked for.
    pub(crate) fn drop_probed(&self, generation: u64) {
        let mut st = self.lock();
        if st.generation == generation && st.pending.is_empty() && st.conn.is_some() {
            log::debug!(
                "node {} ({}): idle connection closed by the node; reconnecting",
                self.node.index,
                self.node.addr
            );
            st.conn = None;
            st.generation += 1;
        }
    }

    /// Writes `cmd` for `call` (or for nobody: `call` is `None`), connecting first if needed
    /// and `connect` allows it; `expect`: what it is answered with. `Ok(None)`: not sent,
    /// since there is no connection and `connect` is false. `Err`: the node cannot be asked
    /// now (backoff, refused, …). `work`: the server time the command may take beyond a
    /// one-key command's, which the connection may stay silent for on top of the stale limit.
    /// `ack`: the command grants (and the node wants its grants acknowledged by replicas,
    /// `Node::ack`: its `WAIT` is written right behind it; on a cluster node's shard, a grant
    /// is not written again after a redirect nobody followed). `asking`: an `ASKING` goes right
    /// before it, in the same write (a cluster's `ASK` redirect), its reply for nobody.
    #[allow(clippy::too_many_arguments)] // a command, its reply's shape and its cost, and when
    pub(crate) fn submit(
        self: &Arc<Self>,
        call: Option<&Call>,
        cmd: &[u8],
        expect: &Expect,
        work: Duration,
        now: Instant,
        settings: &ConnSettings,
        connect: bool,
        (ack, asking): (bool, bool),
    ) -> Result<Option<Submitted>, NodeOutcome> {
        let mut wakes = Wakes::new();
        // A grant is never written again after a redirect its caller did not follow: a late
        // grant would hold a key its holder may already have released.
        let resend = (!ack).then_some(0);
        let ack = ack && self.node.ack.is_some();
        let r = self.submit_locked(
            call,
            (cmd, ack, asking, resend),
            expect,
            work,
            now,
            settings,
            connect,
            &mut wakes,
        );
        // A call that does not drive the connection may leave its command in the buffer for
        // its event loop to write with the others of the same turn (park.rs); the driver
        // writes at once, unless its loop expects others in the same turn.
        let defer = if matches!(&r, Ok(Some(s)) if s.drive) {
            park::defers_driver_writes()
        } else {
            park::defers_writes()
        };
        if !defer || !self.defer_flush(now, settings) {
            self.flush(now, settings, &mut wakes);
        }
        wake_all(&mut wakes, call.map_or(0, |c| c.round));
        r
    }

    /// Leaves this connection's write for the event loop's [`park::flush_deferred`]; false
    /// when the call's park does not defer writes.
    fn defer_flush(self: &Arc<Self>, now: Instant, settings: &ConnSettings) -> bool {
        let link = Arc::clone(self);
        let settings = settings.clone();
        let write = Box::new(move || {
            let mut wakes = Wakes::new();
            link.flush(now, &settings, &mut wakes);
            wake_all(&mut wakes, 0);
        });
        if park::defer(Arc::as_ptr(self) as usize, write).is_err() {
            return false;
        }
        self.lock().deferred_on = Some(std::thread::current().id());
        true
    }

    #[allow(clippy::too_many_arguments)] // the arguments of submit, plus its wake-up list
    fn submit_locked(
        &self,
        call: Option<&Call>,
        (cmd, ack, asking, hops): (&[u8], bool, bool, Option<u8>),
        expect: &Expect,
        work: Duration,
        now: Instant,
        settings: &ConnSettings,
        connect: bool,
        wakes: &mut Wakes,
    ) -> Result<Option<Submitted>, NodeOutcome> {
        let mut st = self.lock();
        if st.driver.is_none() && !st.pending.is_empty() {
            // Owed replies that nobody is reading (their callers left at quorum): read what
            // has arrived, so that a node that closed the connection behind them (a restart)
            // is reconnected now rather than failed for this step, and so that replies that
            // did arrive do not count against the stale limit.
            self.settle(&mut st, now, settings, wakes);
        }
        // Only a caller that will wait judges the connection: a command sent without waiting
        // (the release after a failed attempt) is queued behind what it cleans up, so that a
        // paused node runs both when it resumes, rather than only the `SET` written before a
        // close.
        if call.is_some() {
            self.close_if_hung(&mut st, now, settings, wakes);
        }
        if st.conn.is_none() {
            if !connect {
                return Ok(None);
            }
            self.connect(&mut st, now, settings, wakes)?;
        }
        let conn = st.conn.as_mut().expect("connected above");
        let starting = conn.is_starting();
        let wait = self.node.ack.as_ref().filter(|_| ack);
        let sent = if asking {
            // ASKING holds for the next command only: one before each.
            const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";
            let parts = crate::resp::split_commands(cmd).unwrap_or_else(|| vec![cmd]);
            parts
                .iter()
                .try_for_each(|p| conn.send(ASKING).and_then(|()| conn.send(p)))
        } else {
            conn.send(cmd)
        }
        .and_then(|()| wait.map_or(Ok(()), |a| conn.send(&a.cmd)));
        if let Err(e) = sent {
            let outcome = unreachable_from(&e);
            self.fail_all(&mut st, outcome.clone(), now, settings, wakes);
            return Err(outcome);
        }
        st.pending.push_back(Entry {
            purpose: Purpose::Command {
                call: call.cloned(),
                expect: expect.clone(),
                ack,
                asked: asking,
                resend: (self.node.shard.as_ref()).and(hops).map(|hops| Resend {
                    cmd: Arc::from(cmd),
                    hops,
                }),
            },
            sent_at: now,
            timed: !starting,
            // The server blocks in WAIT for up to its timeout.
            work: work.saturating_add(wait.map_or(Duration::ZERO, |a| a.timeout)),
        });
        st.last_used = now;
        let mut drive = false;
        if st.driver.is_none()
            && let Some(c) = call
        {
            st.driver = Some(Driver {
                call: c.round,
                waker: c.waker_arc(),
            });
            drive = true;
        }
        Ok(Some(Submitted { drive, starting }))
    }

    /// Writes a command again for nobody after a redirect nobody followed (see
    /// [`Redirected`]), `hops` redirects in; with `ASKING` before it for `ASK`.
    pub(crate) fn resend(
        &self,
        r: &Redirected,
        ask: bool,
        now: Instant,
        settings: &ConnSettings,
    ) -> Result<(), NodeOutcome> {
        let mut wakes = Wakes::new();
        let hops = r.resend.hops.saturating_add(1);
        let sent = self.submit_locked(
            None,
            (&r.resend.cmd, false, ask, Some(hops)),
            &r.expect,
            Duration::ZERO,
            now,
            settings,
            true,
            &mut wakes,
        );
        self.flush(now, settings, &mut wakes);
        wake_all(&mut wakes, 0);
        sent.map(|_| ())
    }

    /// Closes the connection if it is hung (see [`stale`]), after reading what its socket
    /// already holds.
    fn close_if_hung(&self, st: &mut State, now: Instant, s: &ConnSettings, wakes: &mut Wakes) {
        let hung = |st: &State| {
            let oldest = st.pending.front().map(|f| f.sent_at);
            let limit = s.stale_limit;
            // Redis sends a pipelined batch's replies once it has run the batch: the work the
            // connection owes may keep it silent for that long (summed only when it matters).
            stale(oldest, st.last_reply, now, limit)
                && stale(
                    oldest,
                    st.last_reply,
                    now,
                    limit.saturating_add(owed_work(st)),
                )
        };
        if !hung(st) {
            return;
        }
        // Nobody may have read the connection for a while (its callers left at quorum), or its
        // reader is a thread that is not running (a busy machine): read what the socket
        // already holds before calling the node hung.
        self.read_replies(st, now, s, wakes);
        if hung(st) {
            // Silent for longer than the stale limit while owing a reply: the node is hung or
            // paused. Close the connection rather than pile more commands behind it.
            let what = format!("no reply for over {} ms", s.stale_limit.as_millis());
            self.fail_all(st, NodeOutcome::Unreachable(what), now, s, wakes);
        }
    }

    /// Writes a health command (a marker probe or write) on the current connection, its reply
    /// for the node itself. Nothing is sent without a connection: the next handshake reads
    /// the marker anyway.
    pub(crate) fn send_health(&self, cmd: &[u8], kind: Hs, now: Instant, settings: &ConnSettings) {
        {
            let mut st = self.lock();
            self.push_health(&mut st, cmd, kind, false, now);
        }
        let mut wakes = Wakes::new();
        self.flush(now, settings, &mut wakes);
        wake_all(&mut wakes, 0);
    }

    /// Queues a health command; `first`: ahead of commands held behind the handshake (the
    /// connection is still starting, so nothing but the handshake was written yet).
    fn push_health(&self, st: &mut State, cmd: &[u8], kind: Hs, first: bool, now: Instant) {
        let Some(conn) = st.conn.as_mut() else { return };
        let sent = if first {
            conn.send_first(cmd)
        } else {
            conn.send(cmd)
        };
        if sent.is_err() {
            return; // the next read sees the broken connection
        }
        let entry = Entry {
            purpose: Purpose::Health(kind),
            sent_at: now,
            timed: false,
            work: Duration::ZERO,
        };
        if first {
            // Right after the handshake's entries, before the held commands' ones.
            let at = st
                .pending
                .iter()
                .position(|e| !matches!(e.purpose, Purpose::Handshake(_)))
                .unwrap_or(st.pending.len());
            st.pending.insert(at, entry);
        } else {
            st.pending.push_back(entry);
        }
    }

    /// Writes one more handshake command on a connection whose handshake is under way, after
    /// the handshake's other commands and before anything held behind them; its reply is
    /// handled as theirs (a cluster node's shard reads its marker once its slot map is known).
    fn push_handshake(&self, st: &mut State, cmd: &[u8], kind: Hs, now: Instant) {
        let Some(conn) = st.conn.as_mut() else { return };
        if conn.send_handshake(cmd).is_err() {
            return; // the next read sees the broken connection
        }
        let at = (st.pending.iter())
            .position(|e| !matches!(e.purpose, Purpose::Handshake(_)))
            .unwrap_or(st.pending.len());
        let entry = Entry {
            purpose: Purpose::Handshake(kind),
            sent_at: now,
            timed: false,
            work: Duration::ZERO,
        };
        st.pending.insert(at, entry);
    }

    /// Reads, without waiting, whatever has arrived for the entries nobody is reading; a
    /// connection found closed (or sending what nobody asked for) is dropped.
    fn settle(&self, st: &mut State, now: Instant, settings: &ConnSettings, wakes: &mut Wakes) {
        if now.saturating_duration_since(st.last_used) <= PROBE_AFTER {
            return;
        }
        let failed = self.read_available(st, now, settings, wakes);
        let closed = failed.is_some()
            || (st.pending.is_empty()
                && st
                    .conn
                    .as_mut()
                    .is_some_and(|c| !matches!(c.next_reply(), Ok(None))));
        if closed {
            // Closed by the node (a restart) or sending what nobody asked for, while nobody
            // was waiting on it: reconnect now, with no backoff, since the node may well be
            // back.
            log::debug!(
                "node {} ({}): connection closed while idle; reconnecting",
                self.node.index,
                self.node.addr
            );
            st.conn = None;
            st.generation += 1;
            st.pending.clear();
            st.parts.clear();
            st.acked = None;
            st.asked_oks = 0;
        }
    }

    /// For the caller that drives this link: the descriptor and what to wait for. `None`
    /// once `call` no longer drives it.
    pub(crate) fn interest(&self, call: &Call) -> Option<(RawFd, Interest)> {
        let st = self.lock();
        if st.driver.as_ref().is_none_or(|d| d.call != call.round) {
            return None;
        }
        st.conn.as_ref().map(|c| {
            let mut interest = c.interest();
            // This thread's loop writes the buffer before it polls (`defer_flush`).
            if !c.is_starting()
                && st
                    .deferred_on
                    .is_some_and(|t| t == std::thread::current().id())
            {
                interest.write = false;
            }
            (c.fd(), interest)
        })
    }

    /// For the caller that drives this link: when its connection's probe is due, and the
    /// probe's descriptor while one runs (see [`Conn::probe`]).
    /// (While a failover group's master is being found: when the sentinel being asked is
    /// given up on.)
    pub(crate) fn probe_wants(&self, call: &Call) -> (Option<Instant>, Option<(RawFd, Interest)>) {
        let st = self.lock();
        match st.conn.as_ref() {
            Some(c) if st.driver.as_ref().is_some_and(|d| d.call == call.round) => {
                let give_up = st.discovery.as_ref().map(|d| d.give_up_at);
                let due = match (c.probe_due(), give_up) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                (due, c.probe_interest())
            }
            _ => (None, None),
        }
    }

    /// Starts or moves on the connection's probe; a node found not to speak TLS fails it.
    /// A sentinel silent past its patience is given up on.
    pub(crate) fn probe(&self, now: Instant, settings: &ConnSettings, wakes: &mut Wakes) {
        let mut st = self.lock();
        if st.discovery.as_ref().is_some_and(|d| d.give_up_at <= now) {
            let why = format!(
                "no answer within {} ms",
                settings.connect_timeout.as_millis() / 2
            );
            return self.sentinel_failed(&mut st, why, now, settings, wakes);
        }
        if let Some(why) = st.conn.as_mut().and_then(|c| c.probe(now)) {
            self.fail_all(&mut st, NodeOutcome::Tls(why), now, settings, wakes);
        }
    }

    /// True while `call` drives this link.
    pub(crate) fn is_driven_by(&self, call: &Call) -> bool {
        self.lock()
            .driver
            .as_ref()
            .is_some_and(|d| d.call == call.round)
    }

    /// Non-blocking I/O after `poll(2)` reported `ready`: completes a connect, writes what is
    /// queued, reads every reply that has arrived and hands each to its call. The calls to
    /// wake are added to `wakes`, for the caller to send (see [`wake_all`]).
    pub(crate) fn on_ready(
        &self,
        ready: Readiness,
        now: Instant,
        settings: &ConnSettings,
        wakes: &mut Wakes,
    ) {
        self.on_ready_locked(ready, now, settings, wakes);
        self.probe(now, settings, wakes);
        self.flush(now, settings, wakes);
    }

    fn on_ready_locked(&self, ready: Readiness, now: Instant, s: &ConnSettings, w: &mut Wakes) {
        let (settings, wakes) = (s, w);
        let mut st = self.lock();
        let Some(conn) = st.conn.as_mut() else { return };
        if let Err(e) = conn.on_writable(ready) {
            let outcome = unreachable_from(&e);
            self.fail_all(&mut st, outcome, now, settings, wakes);
        } else if (ready.readable || ready.error) && !st.pending.is_empty() {
            self.read_replies(&mut st, now, settings, wakes);
        } else if (ready.readable || ready.error)
            && st
                .conn
                .as_mut()
                .is_some_and(|c| !matches!(c.next_reply(), Ok(None)))
        {
            // Readable while nothing is owed: closed by the node, or sending what nobody
            // asked for. Nobody waits on it: reconnect at the next use.
            st.conn = None;
            st.generation += 1;
        }
    }

    /// Reads what has arrived (never waits), whoever drives the link: a caller about to
    /// declare this node timed out checks first that its reply is not already here.
    pub(crate) fn read_now(&self, call: &Call, now: Instant, settings: &ConnSettings) {
        let mut wakes = Wakes::new();
        {
            let mut st = self.lock();
            self.read_replies(&mut st, now, settings, &mut wakes);
        }
        self.flush(now, settings, &mut wakes);
        wake_all(&mut wakes, call.round);
    }

    /// Writes what the connection has queued, outside the lock, unless another caller is
    /// writing already: its next batch then takes these bytes along. Loops while others queue
    /// meanwhile; stops when the socket takes no more (the driver's `POLLOUT` goes on).
    fn flush(&self, now: Instant, settings: &ConnSettings, wakes: &mut Wakes) {
        loop {
            let (sock, buf, generation) = {
                let mut st = self.lock();
                st.deferred_on = None;
                let generation = st.generation;
                let taken = match st.conn.as_mut().map(Conn::take_output) {
                    Some(Ok(Some(t))) => t,
                    Some(Err(e)) => {
                        let outcome = unreachable_from(&e);
                        return self.fail_all(&mut st, outcome, now, settings, wakes);
                    }
                    Some(Ok(None)) | None => return,
                };
                (taken.0, taken.1, generation)
            };
            let written = conn::write_some(&sock, &buf);
            let mut st = self.lock();
            if st.generation != generation {
                return; // replaced meanwhile: those bytes belonged to a dead connection
            }
            let Some(c) = st.conn.as_mut() else { return };
            let all = written.as_ref().is_ok_and(|n| *n == buf.len());
            let r = written.and_then(|n| c.put_back(buf, n));
            if let Err(e) = r {
                let outcome = unreachable_from(&e);
                return self.fail_all(&mut st, outcome, now, settings, wakes);
            }
            if !all {
                return;
            }
        }
    }

    /// Reads every reply that has arrived; a broken connection fails what waits on it.
    fn read_replies(&self, st: &mut State, now: Instant, settings: &ConnSettings, w: &mut Wakes) {
        if let Some(failed) = self.read_available(st, now, settings, w) {
            self.fail_all(st, failed, now, settings, w);
        }
    }

    /// Reads and dispatches every reply that has arrived; returns how the connection failed,
    /// if it did (the caller decides what that means).
    fn read_available(
        &self,
        st: &mut State,
        now: Instant,
        settings: &ConnSettings,
        w: &mut Wakes,
    ) -> Option<NodeOutcome> {
        loop {
            let conn = st.conn.as_mut()?;
            if st.pending.is_empty() {
                // Nothing is owed: do not read until the socket says EAGAIN (a system call per
                // readable connection for nothing). Anything that did arrive unasked is found
                // by the idle probe, or by the next read while something is owed.
                return None;
            }
            return Some(match conn.next_reply() {
                Ok(Some(reply)) => {
                    st.last_used = now;
                    st.last_reply = now;
                    self.dispatch(st, reply, now, settings, w);
                    continue;
                }
                Ok(None) => return None,
                Err(ReadError::Closed) => {
                    NodeOutcome::Unreachable("connection closed by the node".into())
                }
                Err(ReadError::Io(e)) => unreachable_from(&e),
                Err(ReadError::Protocol(s)) => NodeOutcome::Protocol(s),
                Err(ReadError::Tls(s)) => NodeOutcome::Tls(s),
            });
        }
    }

    /// The connection failed: drop it, fail every waiting entry with `outcome`, start the
    /// reconnect backoff.
    fn fail_all(
        &self,
        st: &mut State,
        outcome: NodeOutcome,
        now: Instant,
        settings: &ConnSettings,
        w: &mut Wakes,
    ) {
        if st.discovery.is_some() {
            // The connection to a sentinel failed: the next one is asked.
            return self.sentinel_failed(st, health::describe(&outcome), now, settings, w);
        }
        st.conn = None;
        st.generation += 1;
        // A multi-part entry with some of its replies read fails like the others.
        st.parts.clear();
        st.acked = None;
        st.asked_oks = 0;
        for e in st.pending.drain(..) {
            if let Purpose::Command { call: Some(c), .. } = e.purpose
                && c.fill(c.slot_for(self.node.index), Slot::Failed(outcome.clone()))
            {
                wake_later(w, &c);
            }
        }
        if let Some(d) = st.driver.take() {
            // Its socket is gone: it must stop polling it.
            w.push((d.call, d.waker));
        }
        self.node.record_failure(now, &outcome, settings, true);
    }

    /// `call` stops waiting: if it drives this link, the first other call still waiting for a
    /// reply here drives it from now on. Returns true when nobody drives the link now although
    /// it needs care.
    pub(crate) fn leave(&self, call: &Call) -> bool {
        let next = {
            let mut st = self.lock();
            if st.driver.as_ref().is_none_or(|d| d.call != call.round) {
                return false;
            }
            st.driver = None;
            let index = self.node.index;
            let next = st.pending.iter().find_map(|e| match &e.purpose {
                Purpose::Command { call: Some(c), .. }
                    if c.round != call.round && c.hand(c.slot_for(index)) =>
                {
                    Some(c.clone())
                }
                _ => None,
            });
            match &next {
                Some(c) => {
                    st.driver = Some(Driver {
                        call: c.round,
                        waker: c.waker_arc(),
                    })
                }
                None if Self::needs_care(&st) => return true,
                None => {}
            }
            next
        };
        if let Some(c) = next {
            c.waker().wake();
        }
        false
    }

    /// How many replies the connection owes (`None` without one), for tests.
    #[cfg(test)]
    pub(crate) fn owed(&self) -> Option<usize> {
        let st = self.lock();
        st.conn.as_ref().map(|_| st.pending.len())
    }
}
