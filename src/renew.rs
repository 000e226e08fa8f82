//! Auto-renewal: one background thread per manager keeps auto-renewed leases alive, bounded,
//! and tells the holder when a lease is lost.
//!
//! Each lease falls due when `renew_after × TTL` has passed since its last confirmed renewal.
//! When one falls due, every lease that would fall due within the next half renewal period is
//! renewed with it, by one command per node: a script that, for each key, extends it if it
//! holds our token and reports it missing or another owner's otherwise. Only when a quorum
//! confirmed the key ours in that same round is it put back where a node lost it (a restart
//! without persistence); a lock that a majority lost is reported lost, never re-created. Renewing some leases a little early is what keeps the
//! batches large: leases renewed together fall due together again, so however their
//! acquisitions were spread, each renewal period needs at most about three rounds.
//!
//! A lease counts as renewed when a quorum confirmed it before its validity ended; it is
//! marked lost shortly *before* the validity ends if no renewal was confirmed by then, at once
//! if a quorum reports another owner, and when it reaches its bound (hold time or extensions).
//!
//! A renewal round waits for every node (this thread is off the caller's path). The thread
//! holds a lease's state lock while its renewal is in flight, so `unlock` waits for it; every
//! command to a node goes over the node's one connection, so the release runs after it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::error::{Error, NodeOutcome, Op};
use crate::lease::{
    Calls, Lease, LeaseInner, LeaseState, LostCallback, LostReason, Renewal, Renewals, Shared,
};
use crate::quorum::{Cmd, Limits, Part, Request, Round, Split, Until};
use crate::resp::Reply;
use crate::slot::key_slot;
use crate::ttl::{Px, Ttl};

/// The most keys one renewal command carries; more are split over several commands.
const MAX_KEYS_PER_COMMAND: usize = 1000;

impl Lease {
    /// Turns on auto-renewal: the manager's renewal thread (one per manager, started on first
    /// use) extends this lock to its TTL each time `renew_after × TTL` has passed since the
    /// last success (a third by default), batching renewals that fall due together into one
    /// command per node. A renewal that a quorum confirms also restores the key on a node that
    /// lost it (a node restarted empty); a renewal that finds the key gone (or another owner's)
    /// on so many nodes that no quorum can confirm it marks the lease lost at once. It never
    /// recreates an expired, released or majority-lost lock.
    ///
    /// Renewal is bounded by `max_hold` (1 hour by default) and optionally a number of
    /// extensions. When a renewal cannot confirm a quorum before the validity runs out, or the
    /// bound is reached, the lease is marked **lost** shortly *before* its validity ends: from
    /// then on [`validity`](Self::validity) reads 0, [`is_lost`](Self::is_lost) is true,
    /// [`wait_lost`](Self::wait_lost) returns, and the `on_lost` callback runs once on the
    /// renewal thread. Dropping the lease (or [`stop_renewal`](Self::stop_renewal)) stops
    /// renewal; unlocking stops it and waits for any renewal in flight.
    ///
    /// Calling it again replaces the options. Errors: [`Error::NotHeld`] (unlocked, lost or
    /// expired), [`Error::InvalidInput`] (bad options).
    pub fn auto_renew(&self, opts: crate::RenewOptions) -> Result<(), Error> {
        opts.validate()?;
        let inner = &self.inner;
        let sh = &inner.shared;
        let mut st = inner.lock_state();
        if let Some(e) = inner.not_held_locally(&st, Op::Extend, sh.now()) {
            return Err(e);
        }
        let last = inner
            .expires_at()
            .map(|e| sh.budget.confirmed_at(e, st.ttl.duration()))
            .unwrap_or_else(|| sh.now());
        start_thread(sh)?;
        st.renewal = Some(Renewal::new(opts, last, st.ttl.duration()));
        inner.sync_flags(&st);
        drop(st);
        let mut reg = sh.renewals.lock();
        let w = Arc::downgrade(inner);
        if !reg.leases.iter().any(|l| l.ptr_eq(&w)) {
            reg.leases.push(w);
        }
        reg.dirty = true;
        drop(reg);
        sh.renewals.wake.notify_all();
        Ok(())
    }
}

/// Starts the renewal thread of `sh`'s manager unless it runs. The thread holds only a weak
/// reference, so it never keeps a manager alive, and exits when the manager and its last
/// lease are gone.
fn start_thread(sh: &Arc<Shared>) -> Result<(), Error> {
    let mut reg = sh.renewals.lock();
    if reg.started {
        return Ok(());
    }
    let weak = Arc::downgrade(sh);
    let renewals = Arc::clone(&sh.renewals);
    std::thread::Builder::new()
        .name("redlock-renewal".into())
        .spawn(move || run(weak, renewals))
        .map_err(|e| Error::Internal(format!("cannot start the renewal thread: {e}")))?;
    reg.started = true;
    Ok(())
}

/// Lost before the validity ends by this much: room for the thread to wake up late.
fn lost_margin(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(2), Duration::from_millis(250))
}

/// How soon a failed renewal is tried again.
fn retry_interval(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

enum Verdict {
    Due,
    Later(Instant),
    Done,
    Lost(LostReason),
}

/// What to do with one lease at `now`. `tick`: a renewal round happens now anyway, so a
/// lease due within half a renewal period joins it.
fn examine(inner: &LeaseInner, st: &LeaseState, now: Instant, tick: bool) -> Verdict {
    if st.released || st.lost.is_some() {
        return Verdict::Done;
    }
    let (Some(rs), Some(exp)) = (st.renewal.as_ref(), inner.expires_at()) else {
        return Verdict::Done;
    };
    // A bound past the clock's range (`Duration::MAX`: "never") is no bound.
    let hold_end = inner.acquired_at.checked_add(rs.max_hold);
    let before_hold_end = |t: Instant| hold_end.map_or(t, |end| t.min(end));
    if hold_end.is_some_and(|end| now >= end) {
        return Verdict::Lost(LostReason::MaxHoldReached {
            held: now.duration_since(inner.acquired_at),
        });
    }
    let lost_at = exp
        .checked_sub(lost_margin(st.ttl.duration()))
        .unwrap_or(exp);
    if now >= lost_at {
        let report = rs.last_failure.clone().unwrap_or_else(|| {
            inner.shared.no_io(
                Op::Extend,
                "no renewal was confirmed by a quorum before the validity ran out",
            )
        });
        return Verdict::Lost(LostReason::RenewalFailed(report));
    }
    if let Some(max) = rs.max_extensions
        && rs.extensions >= max
    {
        if now >= rs.next_due {
            return Verdict::Lost(LostReason::MaxExtensionsReached {
                extensions: rs.extensions,
            });
        }
        return Verdict::Later(before_hold_end(rs.next_due.min(lost_at)));
    }
    let early = if tick && rs.last_failure.is_none() {
        st.ttl.duration().mul_f64(rs.renew_after() / 2.0)
    } else {
        Duration::ZERO
    };
    if now + early >= rs.next_due {
        return Verdict::Due;
    }
    Verdict::Later(before_hold_end(rs.next_due.min(lost_at)))
}

type Fired = Vec<(LostCallback, Arc<LeaseInner>)>;

/// The registered leases, each examined: those due now (joined by those due soon, if any is
/// due), and when to look next. Finished leases are dropped from the registry and lost ones
/// marked, their callbacks collected in `fired`.
fn collect(
    sh: &Shared,
    now: Instant,
    fired: &mut Fired,
) -> (Vec<Arc<LeaseInner>>, Option<Instant>) {
    let leases: Vec<Arc<LeaseInner>> = {
        let mut reg = sh.renewals.lock();
        reg.dirty = false;
        reg.leases.retain(|w| w.strong_count() > 0);
        reg.leases.iter().filter_map(Weak::upgrade).collect()
    };
    let mut due = Vec::new();
    let mut next: Option<Instant> = None;
    let mut done: Vec<*const LeaseInner> = Vec::new();
    let mut later: Vec<Arc<LeaseInner>> = Vec::new();
    for l in leases {
        // Never wait on a lease's lock here: its holder may be unlocking it (a round trip).
        // Look again shortly instead.
        let Ok(mut st) = l.state.try_lock() else {
            let soon = now + Duration::from_millis(1);
            next = Some(next.map_or(soon, |n| n.min(soon)));
            continue;
        };
        match examine(&l, &st, now, false) {
            Verdict::Due => {
                drop(st);
                due.push(l);
            }
            Verdict::Later(t) => {
                next = Some(next.map_or(t, |n| n.min(t)));
                drop(st);
                later.push(l);
            }
            Verdict::Done => done.push(Arc::as_ptr(&l)),
            Verdict::Lost(reason) => {
                sh.cluster
                    .metrics
                    .renewal
                    .lost
                    .fetch_add(1, Ordering::Relaxed);
                if let Some(cb) = l.mark_lost(&mut st, reason) {
                    drop(st);
                    fired.push((cb, Arc::clone(&l)));
                }
                done.push(Arc::as_ptr(&l));
            }
        }
    }
    if !due.is_empty() {
        // A round happens now: take along the leases that would fall due soon.
        due.extend(later.into_iter().filter(|l| {
            l.state
                .try_lock()
                .is_ok_and(|st| matches!(examine(l, &st, now, true), Verdict::Due))
        }));
    }
    if !done.is_empty() {
        sh.renewals
            .lock()
            .leases
            .retain(|w| !done.contains(&w.as_ptr()));
    }
    (due, next)
}

type Held<'a> = (&'a Arc<LeaseInner>, MutexGuard<'a, LeaseState>);

/// Renews `due` leases with one command per node (per 1000 keys).
fn renew(sh: &Shared, due: &[Arc<LeaseInner>], fired: &mut Fired) {
    let now = sh.now();
    let mut held: Vec<Held<'_>> = Vec::new();
    for l in due {
        // Held for the whole round: an unlock of this lease waits for it.
        if let Ok(st) = l.state.try_lock()
            && matches!(examine(l, &st, now, true), Verdict::Due)
        {
            held.push((l, st));
        }
    }
    // Each kind names its renewal script: one batch per script (plain keys, holds in a hash),
    // and on a manager with a cluster node one per slot too (a command touches one slot).
    let clustered = sh.cluster.has_shards();
    let slot_of = |h: &Held<'_>| {
        clustered
            .then(|| crate::slot::common_slot(h.0.keys()))
            .flatten()
    };
    let mut batches: Vec<(Option<u16>, Vec<Held<'_>>)> = Vec::new();
    for h in held {
        let script = h.0.kind.renewing().script;
        let slot = slot_of(&h);
        match batches
            .iter_mut()
            .find(|(s, b)| *s == slot && std::ptr::eq(b[0].0.kind.renewing().script, script))
        {
            Some((_, b)) => b.push(h),
            None => batches.push((slot, vec![h])),
        }
    }
    for (slot, batch) in &mut batches {
        // Up to 1000 keys per command; a lease over several resources is never split.
        let mut rest = &mut batch[..];
        while !rest.is_empty() {
            let mut keys = 0;
            let take = rest
                .iter()
                .take_while(|(l, _)| {
                    keys += l.keys().len();
                    keys <= MAX_KEYS_PER_COMMAND
                })
                .count()
                .max(1);
            let (chunk, tail) = rest.split_at_mut(take);
            if let Err(e) = renew_chunk(sh, chunk, *slot, fired) {
                log::warn!("renewal round failed: {e}");
            }
            rest = tail;
        }
    }
}

/// A key of a renewal batch: the key, its arguments, and (its lease, its index among the
/// lease's keys).
type Item<'a> = (&'a [u8], Vec<&'a [u8]>, (usize, usize));

/// One renewal round for up to 1000 keys, all renewed by the same script (and all in `slot`,
/// on a manager with a cluster node). A lease's keys are consecutive items of the command
/// (one, or each resource's for a lease over several).
fn renew_chunk(
    sh: &Shared,
    chunk: &mut [Held<'_>],
    slot: Option<u16>,
    fired: &mut Fired,
) -> Result<(), Error> {
    let n = chunk.len();
    let ttls: Vec<Px> = chunk.iter().map(|(_, st)| st.ttl.px()).collect();
    let (items, spans, split) = layout(sh, chunk, &ttls, slot);
    let Some(first) = chunk.first().map(|h| &h.0) else {
        return Ok(());
    };
    let script = first.kind.renewing().script;
    let calls = |items: &[Item<'_>]| {
        let keys: Vec<&[u8]> = items.iter().map(|i| i.0).collect();
        let args: Vec<&[u8]> = items.iter().flat_map(|i| i.1.iter().copied()).collect();
        script.calls(&keys, &args)
    };
    let (sha, eval) = calls(&items);
    let parts = if split {
        slot_parts(&items, &calls)
    } else {
        Vec::new()
    };
    let req = Request {
        cmd: Cmd::Same(&sha),
        fallback: Some(&eval),
        combine: None,
        slot: slot.or_else(|| crate::slot::common_slot(items.iter().map(|i| i.0))),
        slots: None,
        split: (!parts.is_empty()).then_some(Split {
            parts: &parts,
            combine: end_to_end,
        }),
        grants: false,
        work: items.len(),
    };
    // The shortest TTL's: the tightest bound of the batch.
    let shortest = chunk.iter().map(|(_, st)| st.ttl.duration()).min();
    // One round renews the whole batch and waits for every node: the acquire bound (plus the
    // batch's work), not the validity, so that a dead node does not hold the renewal thread
    // until the leases are nearly lost.
    let node_timeout = sh
        .budget
        .acquire_bound(shortest.unwrap_or(Duration::from_secs(1)));
    // Stop waiting in time to report a lease lost before its validity ends.
    let cap = chunk
        .iter()
        .filter_map(|(l, st)| {
            l.expires_at()
                .and_then(|e| e.checked_sub(lost_margin(st.ttl.duration()) / 2))
        })
        .min();
    let limits = Limits {
        node_timeout,
        cap,
        until: Until::All,
    };
    let s = &sh.cluster.metrics.renewal;
    s.ticks.fetch_add(1, Ordering::Relaxed);
    s.commands.fetch_add(1, Ordering::Relaxed);
    s.attempts.fetch_add(n as u64, Ordering::Relaxed);
    s.max_batch.fetch_max(n as u64, Ordering::Relaxed);
    // The round reads each node's reply as a whole; lease j's outcome is its span's items.
    let round = sh.cluster.round(&req, &|_, r| whole(r), limits)?;
    for (span, held) in spans.iter().zip(chunk.iter_mut()) {
        settle(sh, &round, span, held, fired);
    }
    Ok(())
}

/// A batch's keys as items (`Item`), where each lease's keys are (`spans[j][k]`: lease j's
/// key k), and whether cluster nodes get it split by slot.
fn layout<'a>(
    sh: &Shared,
    chunk: &'a [Held<'_>],
    ttls: &'a [Px],
    slot: Option<u16>,
) -> (Vec<Item<'a>>, Vec<Vec<usize>>, bool) {
    // Each key with its arguments, its lease's index and its own among the lease's keys.
    let mut items: Vec<Item<'_>> = Vec::with_capacity(chunk.len());
    let mut spans: Vec<Vec<usize>> = Vec::with_capacity(chunk.len());
    for (j, ((l, _), ttl)) in chunk.iter().zip(ttls).enumerate() {
        let keys = l.keys();
        spans.push(vec![0; keys.len()]);
        for (k, key) in keys.into_iter().enumerate() {
            let mut args: Vec<&[u8]> = vec![l.token.as_bytes(), ttl];
            args.extend(l.kind.renewing().extra);
            items.push((key, args, (j, k)));
        }
    }
    // On a cluster node, keys that span several slots (leases over several resources) are
    // renewed by one command per slot: the keys go in slot order, so that the parts' replies
    // end to end are the batch's items in order.
    let clustered = sh.cluster.has_shards() && slot.is_none();
    let split = clustered && crate::slot::common_slot(items.iter().map(|i| i.0)).is_none();
    if split {
        items.sort_by_key(|i| crate::slot::key_slot(i.0));
    }
    // Lease j's key k is item spans[j][k].
    for (pos, (_, _, (j, k))) in items.iter().enumerate() {
        spans[*j][*k] = pos;
    }
    (items, spans, split)
}

/// One part per run of `items` in the same slot (they are in slot order), its call made by
/// `calls`.
fn slot_parts(items: &[Item<'_>], calls: &dyn Fn(&[Item<'_>]) -> Calls) -> Vec<Part> {
    (items.chunk_by(|a, b| key_slot(a.0) == key_slot(b.0)))
        .map(|run| {
            let (cmd, eval) = calls(run);
            Part {
                slot: key_slot(run[0].0),
                cmd,
                fallback: Some(eval),
            }
        })
        .collect()
}

/// The one reply a cluster node's per-slot renewal replies stand for: their items end to end
/// (the first reply that is not an array, if one is not).
fn end_to_end(replies: &[Reply]) -> Reply {
    let mut all = Vec::new();
    for r in replies {
        match r {
            Reply::Array(items) => all.extend(items.iter().cloned()),
            other => return other.clone(),
        }
    }
    Reply::Array(all)
}

/// What a node's reply to a renewal command says as a whole: success when it is an array
/// (each lease's own outcome is read from it by [`item`]).
fn whole(r: &Reply) -> NodeOutcome {
    match r {
        Reply::Array(_) => NodeOutcome::Success,
        Reply::Error { text, .. } => NodeOutcome::ServerError(text.clone()),
        other => NodeOutcome::Protocol(format!("unexpected reply: {}", other.describe())),
    }
}

/// One key's outcome on one node, from that node's outcome and reply in a renewal round.
fn item(outcome: &NodeOutcome, reply: Option<&Reply>, j: usize) -> NodeOutcome {
    match (outcome, reply) {
        (NodeOutcome::Success, Some(Reply::Array(items))) => match items.get(j) {
            Some(Reply::Int(1)) => NodeOutcome::Success,
            // Missing (2) or held by another token (0): not ours there.
            Some(Reply::Int(0 | 2)) => NodeOutcome::Rejected,
            Some(Reply::Int(-1)) => {
                NodeOutcome::ServerError("the key holds a value of another type".into())
            }
            other => NodeOutcome::Protocol(format!("unexpected renewal reply item {other:?}")),
        },
        (o, _) => o.clone(),
    }
}

/// A lease's outcome on one node: its keys' (items `span`), the first that is not a success,
/// else a success.
fn items(outcome: &NodeOutcome, reply: Option<&Reply>, span: &[usize]) -> NodeOutcome {
    span.iter()
        .map(|j| item(outcome, reply, *j))
        .find(|o| !o.is_success())
        .unwrap_or(NodeOutcome::Success)
}

/// Applies a renewal round's result to the lease whose keys are items `span`.
fn settle(sh: &Shared, round: &Round, span: &[usize], held: &mut Held<'_>, fired: &mut Fired) {
    let (l, st) = held;
    let s = &sh.cluster.metrics.renewal;
    let outcomes: Vec<NodeOutcome> = round
        .outcomes
        .iter()
        .zip(&round.replies)
        .map(|(o, r)| items(o, r.as_ref(), span))
        .collect();
    // Per node, which of the lease's keys it reported missing.
    let missing: Vec<Vec<bool>> = round
        .replies
        .iter()
        .map(|r| {
            span.iter()
                .map(|j| matches!(r, Some(Reply::Array(a)) if a.get(*j) == Some(&Reply::Int(2))))
                .collect()
        })
        .collect();
    let successes = outcomes.iter().filter(|o| o.is_success()).count();
    let now = sh.now();
    let ttl = st.ttl.duration();
    let q = sh.cluster.quorum();
    if successes >= q && l.expires_at().is_some_and(|o| now < o) {
        l.set_expires(Some(sh.budget.expiry(round.start, ttl)));
        s.renewed.fetch_add(1, Ordering::Relaxed);
        // A quorum confirmed the key ours in this very round: put it back where a node lost
        // it (a restart without persistence), never over another owner's (NX).
        let restored = missing.iter().flatten().filter(|m| **m).count();
        if restored > 0 {
            restore(sh, l, st.ttl, &missing);
            s.restored.fetch_add(restored as u64, Ordering::Relaxed);
            log::info!("renewal restored the lock key on {restored} node(s) that had lost it");
        }
        if let Some(rs) = st.renewal.as_mut() {
            rs.extensions += 1;
            rs.renewed(round.start, ttl);
        }
        return;
    }
    let rejected = outcomes
        .iter()
        .filter(|o| **o == NodeOutcome::Rejected)
        .count();
    let detail = Some("automatic renewal not confirmed by a quorum".to_string());
    let report = sh.cluster.report(Op::Extend, outcomes, detail);
    if sh.cluster.lost_for_sure(rejected) {
        // The key is gone, or another owner's, on so many nodes that no renewal can succeed:
        // the lease is lost (it is never re-created where a majority lost it).
        s.lost.fetch_add(1, Ordering::Relaxed);
        if let Some(cb) = l.mark_lost(st, LostReason::RenewalFailed(report)) {
            fired.push((cb, Arc::clone(l)));
        }
        return;
    }
    log::debug!("renewal failed, retrying: {report}");
    if let Some(rs) = st.renewal.as_mut() {
        rs.last_failure = Some(report);
        rs.next_due = now + retry_interval(ttl);
    }
}

/// Puts the lease's keys back on the nodes where they were missing (`missing[node][k]`),
/// without waiting, with the commands its kind gives (never over another owner's key).
fn restore(sh: &Shared, l: &LeaseInner, ttl: Ttl, missing: &[Vec<bool>]) {
    let keys = l.keys();
    for (k, cmd, eval) in l.kind.restore(l, &ttl.px()) {
        let slot = keys.get(k).map(|key| crate::slot::key_slot(key));
        sh.cluster
            .detach(&cmd, eval.as_deref(), (1, slot), &|i| missing[i][k]);
    }
}

fn fire(fired: Fired) {
    for (cb, inner) in fired {
        let lease = Lease::from_inner(inner);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&lease))).is_err() {
            log::error!("an on_lost callback panicked; the renewal thread carries on");
        }
    }
}

fn run(weak: Weak<Shared>, renewals: Arc<Renewals>) {
    loop {
        let wait = {
            let Some(sh) = weak.upgrade() else { return };
            let mut fired = Vec::new();
            let (due, next) = collect(&sh, sh.now(), &mut fired);
            let again = !due.is_empty();
            if again {
                renew(&sh, &due, &mut fired);
            }
            let now = sh.now();
            // Callbacks run with no lock held, and without keeping the manager alive.
            drop(due);
            drop(sh);
            let fired_any = !fired.is_empty();
            fire(fired);
            if again || fired_any {
                // Renewed leases have new due times: look again before sleeping.
                continue;
            }
            match next {
                Some(t) => t.saturating_duration_since(now),
                // Nothing registered: sleep until a registration or shutdown wakes us.
                None => Duration::from_secs(3600),
            }
        };
        // Waits without keeping the manager alive: a manager dropped meanwhile sets shutdown
        // and notifies (Shared's drop).
        let reg = renewals.lock();
        if reg.shutdown {
            return;
        }
        if reg.dirty || wait.is_zero() {
            continue;
        }
        drop(
            renewals
                .wake
                .wait_timeout(reg, wait)
                .unwrap_or_else(|p| p.into_inner()),
        );
    }
}
