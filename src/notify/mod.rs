//! Waiting for a release: the manager's listener, which wakes waiters when a lock they wait
//! for is released, and [`Cancel`].
//!
//! The release script publishes on a channel named after the lock key (see
//! [`RELEASE`](crate::scripts::RELEASE)). A caller whose attempt was refused
//! [`register`](Listener::register)s for that channel; the listener (one thread per manager,
//! started on first use) keeps one subscriber connection per node ([`Sub`]) and subscribes to
//! every channel that has a waiter, keeping an unused subscription a little longer
//! ([`LINGER`]) so that a hot resource is not subscribed to again for every wait.
//!
//! Waiters of one channel form a queue. A message from any node wakes the first of them only
//! (so a release wakes one thread of this process, however many wait), and a waiter that
//! leaves hands its place, and any wake-up it had not used, to the next. The caller decides
//! what a wake-up means (`acquire`): the first waiter attempts at once, the others wait for
//! their turn.
//!
//! No lost wake-up: a waiter relies on messages only after a quorum of nodes confirmed its
//! channel's subscription *before* its latest attempt started. The holder's key was on a
//! quorum too, so at least one node both releases it and tells the waiter. When a subscriber
//! connection is lost, messages may have been lost with it: the first waiter of every channel
//! that node had confirmed is woken to attempt again.

mod cancel;

pub use cancel::Cancel;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::mux::{self, Interest, Waker};
use crate::node::ConnSettings;
use crate::node::sub::{Sub, SubEvent};
use crate::timing::Clock;

/// How long a subscription nobody waits on is kept before it is dropped.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// The manager's listener: subscriber connections and the waiters on each channel.
pub(crate) struct Listener {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Wakes the listener thread.
    waker: Waker,
    quorum: usize,
    settings: ConnSettings,
    clock: Arc<dyn Clock>,
}

struct State {
    /// The subscriber connections, until the thread starts and takes them.
    subs: Option<Vec<Sub>>,
    started: bool,
    stop: bool,
    nodes: usize,
    channels: HashMap<Vec<u8>, Channel>,
    next_id: u64,
}

struct Channel {
    /// In arrival order; the first is the one a message wakes.
    waiters: VecDeque<Waiter>,
    /// Per node: `SUBSCRIBE` written on the current connection.
    sent: Vec<bool>,
    /// Per node: the current connection confirmed the subscription.
    confirmed: Vec<bool>,
    /// Since when nobody waits here.
    idle_since: Option<Instant>,
    /// Per node: when its latest message arrived (see [`Registration::set_blocked`]).
    last_message: Vec<Option<Instant>>,
    /// The token of the latest release this manager made itself (see
    /// [`Listener::released`]): the nodes' messages about it wake nobody again.
    last_release: Vec<u8>,
    /// When the holder's TTL runs out at the latest, as the waiters last learned it: what a
    /// waiter that becomes the first sleeps until, if no release comes.
    hint: Option<Instant>,
    /// Every message wakes every waiter, not the first only: the channel of observers
    /// ([`Listener::register_observer`]), who each want to see every change.
    broadcast: bool,
}

struct Waiter {
    id: u64,
    waker: Arc<Waker>,
    /// A release was announced since this waiter last attempted.
    notified: bool,
    /// What its latest refusal said (see [`Registration::set_blocked`]); `None`: any node's
    /// message wakes it.
    blocked: Option<Blocked>,
}

/// The nodes that refused a waiter's latest attempt, and how many of them must let go before
/// a quorum can grant it.
struct Blocked {
    /// Per node: it refused, and has not announced a release since.
    nodes: Vec<bool>,
    /// How many more of them must announce a release.
    need: usize,
}

impl Blocked {
    /// Node `i` announced a release: true when enough have for an attempt to be worth it.
    fn freed(&mut self, i: usize) -> bool {
        if self.nodes.get(i).copied().unwrap_or(false) {
            self.nodes[i] = false;
            self.need = self.need.saturating_sub(1);
        }
        self.need == 0
    }
}

impl Channel {
    fn new(nodes: usize) -> Channel {
        Channel {
            waiters: VecDeque::new(),
            sent: vec![false; nodes],
            confirmed: vec![false; nodes],
            idle_since: None,
            last_message: vec![None; nodes],
            last_release: Vec::new(),
            hint: None,
            broadcast: false,
        }
    }

    /// A release of the lease with `token` was announced by this manager: wakes the first
    /// waiter. The release returned once a quorum had deleted the key, so the nodes' messages
    /// about it are redundant: the attempt it causes comes after that quorum.
    fn released_here(&mut self, token: &[u8]) {
        self.last_release = token.to_vec();
        self.notify_first();
    }

    /// Node `i` announced the release of the lease with `token` (received at `now`): wakes the
    /// first waiter if its latest refusal came from nodes of which enough have now let go
    /// (any node's message, when it knows of no refusal).
    ///
    /// Counted per node, and not once per release: a release is not atomic across nodes, so
    /// an attempt caused by the first node's message may still meet the key on the others and
    /// be refused; their messages then wake it again.
    fn announced_by(&mut self, i: usize, token: &[u8], now: Instant) {
        if let Some(t) = self.last_message.get_mut(i) {
            *t = Some(now);
        }
        if !token.is_empty() && self.last_release == token {
            return;
        }
        if self.broadcast {
            return self.notify_first();
        }
        let Some(w) = self.waiters.front_mut() else {
            return;
        };
        if w.blocked.as_mut().is_none_or(|b| b.freed(i)) {
            w.blocked = None;
            w.notified = true;
            w.waker.wake();
        }
    }

    fn confirmations(&self) -> usize {
        self.confirmed.iter().filter(|c| **c).count()
    }

    /// Marks the first waiter notified and wakes it (every waiter, on a broadcast channel).
    fn notify_first(&mut self) {
        let n = if self.broadcast {
            self.waiters.len()
        } else {
            1
        };
        for w in self.waiters.iter_mut().take(n) {
            w.notified = true;
            w.blocked = None;
            w.waker.wake();
        }
    }
}

/// How [`Registration::sleep`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    /// A release was announced: attempt now.
    Notified,
    /// The instant given has come.
    Timeout,
    /// The cancel handle fired.
    Cancelled,
    /// Something changed (this waiter became the first, a subscription was confirmed, or a
    /// wake-up meant for something else): look again, without attempting.
    Changed,
}

impl Listener {
    /// A listener over these subscriber connections (one per node, in node order). Nothing
    /// starts until the first waiter registers.
    pub(crate) fn new(
        subs: Vec<Sub>,
        quorum: usize,
        settings: ConnSettings,
        clock: Arc<dyn Clock>,
    ) -> io::Result<Listener> {
        let nodes = subs.len();
        Ok(Listener {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    subs: Some(subs),
                    started: false,
                    stop: false,
                    nodes,
                    channels: HashMap::new(),
                    next_id: 1,
                }),
                waker: Waker::new()?,
                quorum,
                settings,
                clock,
            }),
        })
    }

    /// Registers the calling thread (woken through `waker`) as a waiter on `channel`, last in
    /// its queue, and has the listener subscribe to it. Fails only if the listener thread
    /// cannot be started (the caller then waits without notifications).
    pub(crate) fn register(&self, channel: &[u8], waker: Arc<Waker>) -> io::Result<Registration> {
        self.register_as(channel, waker, false)
    }

    /// Registers the calling thread as an observer of `channel`: as
    /// [`register`](Self::register), but every message on the channel wakes every observer
    /// (an election's leader record, whose messages announce a new term or value). A channel
    /// is either a lock's, with one waiter woken per message, or observers', never both.
    pub(crate) fn register_observer(
        &self,
        channel: &[u8],
        waker: Arc<Waker>,
    ) -> io::Result<Registration> {
        self.register_as(channel, waker, true)
    }

    fn register_as(
        &self,
        channel: &[u8],
        waker: Arc<Waker>,
        broadcast: bool,
    ) -> io::Result<Registration> {
        let mut st = self.inner.lock();
        if !st.started {
            let inner = Arc::clone(&self.inner);
            std::thread::Builder::new()
                .name("redlock-listener".into())
                .spawn(move || run(&inner))?;
            st.started = true;
        }
        let id = st.next_id;
        st.next_id += 1;
        let nodes = st.nodes;
        let ch = st
            .channels
            .entry(channel.to_vec())
            .or_insert_with(|| Channel::new(nodes));
        ch.idle_since = None;
        ch.broadcast |= broadcast;
        ch.waiters.push_back(Waiter {
            id,
            waker: Arc::clone(&waker),
            notified: false,
            blocked: None,
        });
        let new = ch.sent.iter().any(|s| !s);
        drop(st);
        if new {
            self.inner.waker.wake();
        }
        Ok(Registration {
            inner: Arc::clone(&self.inner),
            channel: channel.to_vec(),
            id,
            waker,
        })
    }

    /// This manager released the lease with `token` on `channel`, confirmed by a quorum: wakes
    /// its first waiter here at once, without waiting for the nodes' messages (which then wake
    /// nobody else).
    pub(crate) fn released(&self, channel: &[u8], token: &[u8]) {
        let mut st = self.inner.lock();
        if let Some(ch) = st.channels.get_mut(channel) {
            ch.released_here(token);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.inner.waker.wake();
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One waiter's place in a channel's queue; leaving (dropping it) hands the place on.
pub(crate) struct Registration {
    inner: Arc<Inner>,
    channel: Vec<u8>,
    id: u64,
    waker: Arc<Waker>,
}

impl Registration {
    /// True when a quorum of nodes has confirmed the subscription: from now on a release is
    /// announced to this waiter (an attempt that starts now closes the window before).
    pub(crate) fn subscribed(&self) -> bool {
        let st = self.inner.lock();
        st.channels
            .get(&self.channel)
            .is_some_and(|c| c.confirmations() >= self.inner.quorum)
    }

    /// Per node: it has confirmed the subscription on its current connection (a message it
    /// publishes from now on reaches this waiter, unless the connection drops, which wakes it).
    pub(crate) fn confirmed(&self) -> Vec<bool> {
        let st = self.inner.lock();
        st.channels
            .get(&self.channel)
            .map_or_else(Vec::new, |c| c.confirmed.clone())
    }

    /// True when this waiter is the first of its queue.
    pub(crate) fn is_first(&self) -> bool {
        let st = self.inner.lock();
        st.channels
            .get(&self.channel)
            .and_then(|c| c.waiters.front())
            .is_some_and(|w| w.id == self.id)
    }

    /// When the holder's TTL runs out at the latest, as learned by the waiters of this channel
    /// (see [`set_hint`](Self::set_hint)).
    pub(crate) fn hint(&self) -> Option<Instant> {
        let st = self.inner.lock();
        st.channels.get(&self.channel).and_then(|c| c.hint)
    }

    /// Records when the holder's TTL runs out at the latest: the first waiter does when it
    /// learns it from a refusal, and a waiter that was granted the lock records its lease's
    /// expiry, for the waiter after it.
    pub(crate) fn set_hint(&self, t: Instant) {
        let mut st = self.inner.lock();
        if let Some(c) = st.channels.get_mut(&self.channel) {
            c.hint = Some(t);
        }
    }

    /// Records what this waiter's latest refusal said, for an attempt that started at
    /// `since`: the nodes that refused (`refused[i]`), of which `need` must announce a release
    /// before a quorum can grant it. From then on only their messages wake it, once `need` of
    /// them have come. Messages that arrived since `since` count already: one of them may be
    /// the release that came right after the node refused.
    pub(crate) fn set_blocked(&self, refused: Vec<bool>, need: usize, since: Instant) {
        let mut st = self.inner.lock();
        let Some(c) = st.channels.get_mut(&self.channel) else {
            return;
        };
        let mut b = Blocked {
            nodes: refused,
            need,
        };
        let mut free = b.need == 0;
        for (i, t) in c.last_message.iter().enumerate() {
            if t.is_some_and(|t| t >= since) {
                free |= b.freed(i);
            }
        }
        let Some(w) = c.waiters.iter_mut().find(|w| w.id == self.id) else {
            return;
        };
        if free {
            w.blocked = None;
            w.notified = true;
            w.waker.wake();
        } else {
            w.blocked = Some(b);
        }
    }

    /// Forgets the latest refusal: any node's message wakes this waiter again.
    pub(crate) fn clear_blocked(&self) {
        let mut st = self.inner.lock();
        if let Some(w) = st
            .channels
            .get_mut(&self.channel)
            .and_then(|c| c.waiters.iter_mut().find(|w| w.id == self.id))
        {
            w.blocked = None;
        }
    }

    /// Takes the notification, if one came since the last call.
    pub(crate) fn take_notified(&self) -> bool {
        let mut st = self.inner.lock();
        let Some(w) = st
            .channels
            .get_mut(&self.channel)
            .and_then(|c| c.waiters.iter_mut().find(|w| w.id == self.id))
        else {
            return false;
        };
        std::mem::take(&mut w.notified)
    }

    /// Sleeps until notified, cancelled, `until` (never, for `None`), or any other wake-up of
    /// this thread. A notification is left for [`take_notified`](Self::take_notified).
    pub(crate) fn sleep(
        &self,
        until: Option<Instant>,
        cancel: Option<&Cancel>,
    ) -> io::Result<Woke> {
        let _watch = cancel.map(|c| c.watch(Arc::clone(&self.waker)));
        let check = |now: Instant| {
            if cancel.is_some_and(Cancel::is_fired) {
                Some(Woke::Cancelled)
            } else if self.notified() {
                Some(Woke::Notified)
            } else if until.is_some_and(|u| now >= u) {
                Some(Woke::Timeout)
            } else {
                None
            }
        };
        let now = self.inner.clock.now();
        if let Some(w) = check(now) {
            return Ok(w);
        }
        let timeout = until.map(|u| u.saturating_duration_since(now));
        mux::sleep(&self.waker, timeout)?;
        Ok(check(self.inner.clock.now()).unwrap_or(Woke::Changed))
    }

    fn notified(&self) -> bool {
        let st = self.inner.lock();
        st.channels
            .get(&self.channel)
            .and_then(|c| c.waiters.iter().find(|w| w.id == self.id))
            .is_some_and(|w| w.notified)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let Some(ch) = st.channels.get_mut(&self.channel) else {
            return;
        };
        let Some(pos) = ch.waiters.iter().position(|w| w.id == self.id) else {
            return;
        };
        let me = ch.waiters.remove(pos);
        if pos == 0
            && let Some(next) = ch.waiters.front_mut()
        {
            // The next waiter is first now: it may need to attempt (a wake-up this one did
            // not use), or at least to wait as the first does. What its own last refusal said
            // may be out of date: any message wakes it.
            next.notified |= me.is_some_and(|w| w.notified);
            next.blocked = None;
            next.waker.wake();
        }
        if ch.waiters.is_empty() {
            ch.idle_since = Some(now);
            drop(st);
            self.inner.waker.wake(); // to unsubscribe once the linger has passed
        }
    }
}

const READ: Interest = Interest {
    read: true,
    write: false,
};

/// The listener thread: keeps the subscriber connections and the subscriptions up, and turns
/// their events into wake-ups, until the manager is dropped.
fn run(inner: &Inner) {
    let Some(mut subs) = inner.lock().subs.take() else {
        return;
    };
    let s = &inner.settings;
    let mut events: Vec<(usize, SubEvent)> = Vec::new();
    let mut ev: Vec<SubEvent> = Vec::new();
    loop {
        let now = inner.clock.now();
        // The next subscription to linger out, if any; then the connections' deadlines.
        let mut next: Option<Instant> = {
            let mut st = inner.lock();
            if st.stop {
                return;
            }
            drop_idle(&mut st, &mut subs, now, s);
            let wanted = !st.channels.is_empty();
            for (i, sub) in subs.iter_mut().enumerate() {
                if wanted && sub.may_connect(now) {
                    sub.connect(now, s, &mut ev);
                }
                if sub.interest().is_some() {
                    let mut chans: Vec<&[u8]> = Vec::new();
                    for (k, c) in st.channels.iter_mut() {
                        if !c.sent[i] {
                            c.sent[i] = true;
                            chans.push(k);
                        }
                    }
                    sub.subscribe(&chans, now, s);
                }
                sub.flush(now, s, &mut ev);
                events.extend(ev.drain(..).map(|e| (i, e)));
            }
            apply(&mut st, &mut events, inner.quorum, now);
            (st.channels.values())
                .filter_map(|c| c.idle_since)
                .map(|t| t + LINGER)
                .min()
        };
        let mut watch = vec![(inner.waker.fd(), READ)];
        let mut owners = Vec::new();
        for (i, sub) in subs.iter().enumerate() {
            if let Some(w) = sub.interest() {
                watch.push(w);
                owners.push(i);
            }
            if let Some(d) = sub.deadline(s) {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        let timeout = next.map(|t| t.saturating_duration_since(now));
        let polled = mux::poll_once(&watch, timeout).inspect_err(|e| {
            log::error!("redlock listener: poll failed: {e}; waiters fall back to retries");
        });
        let Ok(ready) = polled else {
            inner.lock().stop = true;
            return;
        };
        if ready[0].readable {
            inner.waker.drain();
        }
        let now = inner.clock.now();
        for (r, &i) in ready[1..].iter().zip(&owners) {
            if *r != mux::Readiness::default() {
                subs[i].on_ready(*r, now, s, &mut ev);
                events.extend(ev.drain(..).map(|e| (i, e)));
            }
        }
        for (i, sub) in subs.iter_mut().enumerate() {
            if sub.deadline(s).is_some_and(|d| now >= d) {
                sub.on_deadline(now, s, &mut ev);
                events.extend(ev.drain(..).map(|e| (i, e)));
            }
        }
        if !events.is_empty() {
            apply(&mut inner.lock(), &mut events, inner.quorum, now);
        }
    }
}

/// Subscriptions nobody has used for the linger time go.
fn drop_idle(st: &mut State, subs: &mut [Sub], now: Instant, s: &ConnSettings) {
    let expired: Vec<Vec<u8>> = st
        .channels
        .iter()
        .filter(|(_, c)| c.idle_since.is_some_and(|t| now >= t + LINGER))
        .map(|(k, _)| k.clone())
        .collect();
    for k in &expired {
        if let Some(c) = st.channels.remove(k) {
            for (i, sub) in subs.iter_mut().enumerate() {
                if c.sent[i] {
                    sub.unsubscribe(&[k.as_slice()], now, s);
                }
            }
        }
    }
}

/// Applies subscriber events to the waiters.
fn apply(st: &mut State, events: &mut Vec<(usize, SubEvent)>, quorum: usize, now: Instant) {
    for (i, e) in events.drain(..) {
        match e {
            SubEvent::Up => {}
            SubEvent::Down(_) => {
                for c in st.channels.values_mut() {
                    c.sent[i] = false;
                    if std::mem::take(&mut c.confirmed[i]) {
                        // A release announced meanwhile would have been lost.
                        c.notify_first();
                    }
                }
            }
            SubEvent::Subscribed(k) => {
                if let Some(c) = st.channels.get_mut(&k)
                    && c.sent[i]
                    && !std::mem::replace(&mut c.confirmed[i], true)
                    && c.confirmations() == quorum
                {
                    // Waiters may be waiting for exactly this before their next attempt.
                    for w in &c.waiters {
                        w.waker.wake();
                    }
                }
            }
            SubEvent::Message(k, token) => {
                if let Some(c) = st.channels.get_mut(&k) {
                    c.announced_by(i, &token, now);
                }
            }
        }
    }
}
