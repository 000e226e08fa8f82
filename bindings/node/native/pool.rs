//! The binding's own threads: every blocking call of the engine runs on one of them, never on
//! libuv's shared pool (four threads by default, which `fs`, `dns` and `zlib` also use). A
//! job goes to an idle thread when there is one, else to a new thread, so N calls that wait
//! take N threads and never queue behind each other; a thread idle for `IDLE` exits.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// A job: the blocking work, which returns what is left to do once the thread is listed as
/// idle again (settling the Promise). So the JavaScript that the settlement runs, calling
/// again at once (a release after an acquisition), finds this thread idle and gets it back,
/// rather than a new thread.
pub type Job = Box<dyn FnOnce() -> After + Send + 'static>;
pub type After = Box<dyn FnOnce() + Send + 'static>;

const IDLE: Duration = Duration::from_secs(30);

/// One idle thread's mailbox.
#[derive(Default)]
struct Slot {
    job: Mutex<Option<Job>>,
    ready: Condvar,
}

#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Arc<Slot>>>,
    spawned: std::sync::atomic::AtomicU64,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `job` on one of the binding's threads: an idle one, else a new one.
pub fn submit(job: Job) {
    let p = pool();
    let mut idle = lock(&p.idle);
    if let Some(slot) = idle.pop() {
        *lock(&slot.job) = Some(job);
        drop(idle);
        slot.ready.notify_one();
        return;
    }
    drop(idle);
    let n = p.spawned.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
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
        lock(&p.idle).push(slot.clone());
        after();
        job = match wait(p, &slot) {
            Some(j) => j,
            None => return,
        };
    }
}

/// The next job given to this idle thread, or `None` once it has been idle for `IDLE` (it
/// has then left the idle list, so nothing more is given to it).
fn wait(p: &Pool, slot: &Arc<Slot>) -> Option<Job> {
    let mut job = lock(&slot.job);
    loop {
        if let Some(j) = job.take() {
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
