//! The binding's own threads, for the calls that do not run on the event loop (`looped`): an
//! environment whose loop cannot be reached, the suspended calls of a torn-down worker, and
//! the benchmark's comparison row. A call runs on one of them, never on libuv's shared pool
//! (four threads by default, which `fs`, `dns` and `zlib` also use). A job goes to an idle thread when there is one, else to a new thread, so N calls that wait
//! take N threads and never queue behind each other; a thread idle for `IDLE` exits.
//!
//! **The hand-over.** Waking a thread asleep on a condition variable costs tens of
//! microseconds on a virtual machine (about 40 µs measured on the 2-core CI machine), and a
//! JavaScript caller that awaits each result pays it on every call: an acquisition, then its
//! release. So a thread that finishes a job while no other job is running keeps watching its
//! mailbox for up to `SPIN` before it sleeps: the caller's next call (settled, its
//! JavaScript run, the next call made) usually comes within that window and starts at once.
//! At most one thread watches at a time, and none does while other jobs run, so the watching
//! costs at most `SPIN` of one core after a call made alone and nothing when calls overlap
//! (there the machine's cores are busy with real work, and the thread would only take one
//! from it).

use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A job: the blocking work, which returns what is left to do once the thread is listed as
/// idle again (settling the Promise). So the JavaScript that the settlement runs, calling
/// again at once (a release after an acquisition), finds this thread idle and gets it back,
/// rather than a new thread.
pub type Job = Box<dyn FnOnce() -> After + Send + 'static>;
pub type After = Box<dyn FnOnce() + Send + 'static>;

const IDLE: Duration = Duration::from_secs(30);

/// How long a thread that finished the only running job watches for the next one before it
/// sleeps. Longer than a settlement's round through the event loop (about 70 µs measured:
/// the wake-up of the JavaScript thread and the caller's next call), short enough that an
/// application calling now and then spends nothing it would notice.
const SPIN: Duration = Duration::from_micros(250);

/// One idle thread's mailbox.
#[derive(Default)]
struct Slot {
    job: Mutex<Option<Job>>,
    ready: Condvar,
    /// A job was put in `job` (read by a watching thread without the lock).
    given: AtomicBool,
    /// This thread is watching its mailbox (so a submitter gives the job to it first).
    watching: AtomicBool,
}

#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Arc<Slot>>>,
    spawned: std::sync::atomic::AtomicU64,
    /// Jobs given out and not yet finished. Counted once the job is in its slot, so a thread
    /// watching for it sees the job there whenever it sees the count rise; signed, as the job
    /// may finish before its submitter counts it (the count only steers the watching).
    running: AtomicIsize,
    /// Whether a thread is watching its mailbox (at most one).
    watcher: AtomicBool,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `job` on one of the binding's threads: the watching one, else the idle one that
/// finished last, else a new one.
pub fn submit(job: Job) {
    let p = pool();
    let mut idle = lock(&p.idle);
    let pick = idle
        .iter()
        .rposition(|s| s.watching.load(Ordering::SeqCst))
        .or_else(|| idle.len().checked_sub(1));
    if let Some(i) = pick {
        let slot = idle.remove(i);
        drop(idle);
        *lock(&slot.job) = Some(job);
        slot.given.store(true, Ordering::SeqCst);
        p.running.fetch_add(1, Ordering::SeqCst);
        slot.ready.notify_one();
        return;
    }
    drop(idle);
    p.running.fetch_add(1, Ordering::SeqCst);
    let n = p.spawned.fetch_add(1, Ordering::Relaxed) + 1;
    std::thread::Builder::new()
        .name(format!("redlock-node-{n}"))
        .spawn(move || worker(job))
        .expect("the Node binding could not start a thread");
}

fn worker(first: Job) {
    let p = pool();
    let slot = Arc::new(Slot::default());
    let mut job = first;
    loop {
        let after = job();
        let alone = p.running.fetch_sub(1, Ordering::SeqCst) <= 1;
        lock(&p.idle).push(slot.clone());
        after();
        if alone {
            watch(p, &slot);
        }
        job = match wait(p, &slot) {
            Some(j) => j,
            None => return,
        };
    }
}

/// Watches `slot` for a job for up to `SPIN`, unless another thread is watching; stops early
/// when a job starts anywhere (given to this slot, it is already there). Returns with the job
/// (if one came) left in the slot for `wait` to take.
fn watch(p: &Pool, slot: &Slot) {
    if p.watcher
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    slot.watching.store(true, Ordering::SeqCst);
    let start = Instant::now();
    'watch: while start.elapsed() < SPIN {
        for _ in 0..64 {
            if slot.given.load(Ordering::Acquire) || p.running.load(Ordering::Relaxed) > 0 {
                break 'watch;
            }
            std::hint::spin_loop();
        }
    }
    slot.watching.store(false, Ordering::SeqCst);
    p.watcher.store(false, Ordering::SeqCst);
}

/// The next job given to this idle thread, or `None` once it has been idle for `IDLE` (it
/// has then left the idle list, so nothing more is given to it).
fn wait(p: &Pool, slot: &Arc<Slot>) -> Option<Job> {
    let mut job = lock(&slot.job);
    loop {
        if let Some(j) = job.take() {
            slot.given.store(false, Ordering::SeqCst);
            return Some(j);
        }
        let (next, t) = slot
            .ready
            .wait_timeout(job, IDLE)
            .unwrap_or_else(|e| e.into_inner());
        job = next;
        if t.timed_out() && job.is_none() {
            drop(job);
            let mut idle = lock(&p.idle);
            if let Some(i) = idle.iter().position(|s| Arc::ptr_eq(s, slot)) {
                idle.swap_remove(i);
                return None;
            }
            // A submitter took this slot and is handing it a job: wait for it.
            drop(idle);
            job = lock(&slot.job);
        }
    }
}

/// Threads started so far.
pub fn spawned() -> u64 {
    pool().spawned.load(std::sync::atomic::Ordering::Relaxed)
}
