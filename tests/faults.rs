//! The fault-injection suite: five local redis-server nodes, several worker processes that
//! take turns on one lock, faults injected by a schedule, and a checker that reads what every
//! worker believed and counts mutual-exclusion violations.
//!
//! `cargo test` runs every schedule for a few seconds and fails on a violation in any schedule
//! where the algorithm promises safety. The long run, whose table is in docs/faults.md:
//!
//!     cargo test --release --test faults -- --secs 60
//!
//! Other options: `--schedule NAME` (repeatable), `--workers N` (lock workers),
//! `--permit-workers N` (semaphore workers), `--leader-workers N` (election workers). This file is its own test harness
//! (`harness = false`); `faults worker …` is the worker process (the same binary).
//!
//! Workers take the lock in five ways (by id, see [`Role`]), which all have to exclude each
//! other: the plain lock (fenced and unfenced in turn: the unfenced one is the pipelined
//! `SET NX PX` with no script, the fenced one a script); a reentrant lock with an owner id of their own (one per process),
//! re-entered 1 to 5 times inside every critical section and those leases released in a random
//! order before the section's write (a re-entry that freed a node early would let another
//! worker in while the outer lease still believes it holds the lock); a shared lock, whose
//! sections may overlap each other's and nothing else; a multi-resource lock of the lock's
//! resource and one of the worker's own; and the fair lock, whose waiters queue with tickets
//! while the others barge in. The table gives the share of the plain and of the fair workers'
//! acquisitions that were granted. The checker counts two sections that overlap while
//! both are valid as a violation unless both are shared.
//!
//! The failover schedules make nodes 0–2 failover groups behind one address each (a master,
//! and a replica whose replication link lags 150 ms, as a managed service's primary endpoint):
//! the master is killed, the replica promoted without the writes it had not received yet, the
//! address moved to it, and the old master brought back empty as its replica. Without restart
//! quarantine a promoted replica grants locks whose holders it never heard of.
//!
//! Other workers (`--permit-workers`, 3 by default) take permits of one counting semaphore of
//! [`PERMITS`] permits, a name of its own. The checker counts how many permits were valid at one
//! instant: more than [`PERMITS`] is a violation, and so are two valid permits on one slot. A
//! permit's fencing token only rises per slot, so permits never meet the fenced store's checks.
//!
//! Leader workers (`--leader-workers`, 2 by default) campaign in one election, [`ELECTION`],
//! and lead for a while, checking before each step that they still lead. The checker counts
//! two leaderships that overlap while both are valid (a violation) and a leader whose term is
//! not above the one before it (a term regression; allowed only where a majority loses its
//! data, as for fencing tokens).

mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, LockOptions, Redlock, Wait, scripts};
use support::proxy::DelayProxy;
use support::redis_cluster::RedisCluster;
use support::{RedisServer, mono_ns};

const NODES: usize = 5;
const TTL: Duration = Duration::from_millis(1000);
/// The managers' maximum TTL, and so the restart quarantine.
const MAX_TTL: Duration = Duration::from_millis(1000);
/// The permit count (P) of the semaphore the permit workers share.
const PERMITS: u32 = 2;
/// That semaphore's name (independent of the lock's resource, whatever its name).
const SEMAPHORE: &str = "faults-sem";
/// The election the leader workers campaign in.
const ELECTION: &str = "faults-elect";

/// A schedule: its faults, and what the algorithm promises under them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Schedule {
    None,
    KillDelayedRestart,
    KillRestartNowUnprotected,
    KillRestart,
    KillMajorityRestart,
    KillWithAof,
    PauseMinority,
    PauseMajority,
    Latency,
    WorkerPause,
    Failover,
    FailoverUnprotected,
    ClusterReshard,
}

use Schedule::*;

/// The nodes that are failover groups (a master and a lagging replica behind one address) in
/// the failover schedules.
const GROUPS: usize = 3;

/// How far a group's replica lags behind its master (one way, on its replication link): the
/// writes of the last moment before a failover are lost, as with asynchronous replication.
const REPLICA_LAG: Duration = Duration::from_millis(150);

const ALL: [Schedule; 13] = [
    None,
    KillDelayedRestart,
    KillRestartNowUnprotected,
    KillRestart,
    KillMajorityRestart,
    KillWithAof,
    PauseMinority,
    PauseMajority,
    Latency,
    WorkerPause,
    Failover,
    FailoverUnprotected,
    ClusterReshard,
];

impl Schedule {
    fn name(self) -> &'static str {
        match self {
            None => "none",
            KillDelayedRestart => "kill-delayed-restart",
            KillRestartNowUnprotected => "kill-restart-now-no-quarantine",
            KillRestart => "kill-restart",
            KillMajorityRestart => "kill-majority-restart",
            KillWithAof => "kill-restart-now-aof-always",
            PauseMinority => "pause-minority",
            PauseMajority => "pause-majority",
            Latency => "latency",
            WorkerPause => "worker-gc-pause",
            Failover => "failover",
            FailoverUnprotected => "failover-no-quarantine",
            ClusterReshard => "cluster-reshard",
        }
    }

    /// What is expected, as docs/faults.md states it.
    fn expected(self) -> &'static str {
        match self {
            None => "no violations",
            KillDelayedRestart => "no violations (restart after longer than the max TTL)",
            KillRestartNowUnprotected => {
                "the known unsafe case: violations possible (no persistence, no quarantine)"
            }
            KillRestart => {
                "no violations (default configuration: restarted nodes quarantined, also by \
                 workers started after the restart); fencing tokens may go back once a majority \
                 has lost its counters"
            }
            KillMajorityRestart => {
                "no violations (default configuration); unavailable until the maximum TTL \
                 has passed after each restart"
            }
            KillWithAof => "no violations (appendfsync always)",
            PauseMinority => "no violations; the live majority decides",
            PauseMajority => "unavailable while paused, never a violation",
            Latency => "no violations",
            WorkerPause => {
                "no violations while valid; a late write is never accepted after a newer one"
            }
            Failover => {
                "no violations (default configuration: a promoted replica is quarantined, also \
                 by workers started after the failover)"
            }
            FailoverUnprotected => {
                "violations possible: the promoted replica lacks the last writes (no quarantine)"
            }
            ClusterReshard => {
                "no violations: every node a Redis Cluster of 2 primaries whose lock and \
                 semaphore slots keep moving (MOVED, ASK followed; restart quarantine per \
                 shard, the slots' markers moving with them)"
            }
        }
    }

    /// Whether the algorithm promises no violation under this schedule.
    fn safe(self) -> bool {
        !matches!(self, KillRestartNowUnprotected | FailoverUnprotected)
    }

    /// Whether every node keeps its data (and so its fencing counters): not when nodes are
    /// restarted at once without persistence. Fencing tokens promise to grow only while a
    /// majority keeps its data; restart quarantine covers lock keys (they expire within the
    /// maximum TTL), not the counters, which never expire.
    fn keeps_data(self) -> bool {
        !matches!(
            self,
            KillRestartNowUnprotected
                | KillRestart
                | KillMajorityRestart
                | Failover
                | FailoverUnprotected
        )
    }

    /// Restart quarantine, except where the point is to run without it: the unprotected case,
    /// and nodes that persist every write (they need none).
    fn quarantine(self) -> bool {
        !matches!(
            self,
            KillRestartNowUnprotected | KillWithAof | FailoverUnprotected
        )
    }

    /// Critical sections, in ms: long ones where restarts must erode a holder's copies within
    /// one hold to show the unsafe case (and that quarantine prevents it).
    fn hold_ms(self) -> (u64, u64) {
        match self {
            KillRestartNowUnprotected
            | KillRestart
            | KillMajorityRestart
            | KillWithAof
            | Failover
            | FailoverUnprotected => (300, 800),
            _ => (20, 200),
        }
    }

    /// Worker processes live for a random 0.5–1.5 s and are replaced by new ones, so that
    /// managers that never saw a node before meet it right after its restart.
    fn recreate_workers(self) -> bool {
        matches!(
            self,
            KillRestart | KillMajorityRestart | Failover | FailoverUnprotected
        )
    }

    fn failover(self) -> bool {
        matches!(self, Failover | FailoverUnprotected)
    }

    fn aof(self) -> bool {
        self == KillWithAof
    }
}

/// The shortest worker-gc-pause schedule, in seconds (see `run_schedule`).
const MIN_PAUSE_SCHEDULE_SECS: f64 = 8.0;

/// How a worker takes the lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Plain,
    Reentrant,
    Shared,
    /// `acquire_many` of the lock's resource and one of the worker's own (unfenced).
    Many,
    /// A fenced permit of the semaphore [`SEMAPHORE`], not the lock.
    Permit,
    /// The fair lock (first come, first served), fenced.
    Fair,
}

impl Role {
    /// The name a worker's log gives its role.
    fn name(self) -> &'static str {
        match self {
            Role::Plain => "plain",
            Role::Reentrant => "reentrant",
            Role::Shared => "shared",
            Role::Many => "many",
            Role::Permit => "permit",
            Role::Fair => "fair",
        }
    }
}

/// Worker `id`'s role: with `--roles mixed` (the default), of every seven, one plain, two
/// reentrant, two shared, one multi-resource, one fair; with `--roles plain` or `--roles fair`,
/// every lock worker takes that lock (to compare the two's availability under each schedule).
fn role(id: usize, roles: &str) -> Role {
    match roles {
        "plain" => return Role::Plain,
        "fair" => return Role::Fair,
        _ => {}
    }
    match id % 7 {
        0 => Role::Plain,
        6 => Role::Fair,
        1 | 5 => Role::Reentrant,
        2 | 4 => Role::Shared,
        _ => Role::Many,
    }
}

/// One granted critical section, times in `CLOCK_MONOTONIC` nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    start: u128,
    end: u128,
    valid_until: u128,
    worker: usize,
    token: u64,
    /// The fenced store's answer: accepted, rejected, or no answer.
    write: Option<bool>,
    /// When the write to the fenced store was sent (it ended at `end`).
    write_start: u128,
    /// A shared section: it may overlap other shared sections.
    shared: bool,
    /// The worker's role, by name.
    role: String,
    /// The worker process (workers are replaced by new processes in some schedules).
    pid: u32,
}

/// One granted permit of the semaphore, times as a [`Grant`]'s: held from `start` to `end`,
/// valid until `valid_until`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Permit {
    start: u128,
    end: u128,
    valid_until: u128,
    slot: u32,
    token: u64,
    worker: usize,
}

impl Permit {
    /// The permit as a critical section, for a violation's report.
    fn as_grant(&self) -> Grant {
        Grant {
            start: self.start,
            end: self.end,
            valid_until: self.valid_until,
            worker: self.worker,
            token: self.token,
            write: Option::None,
            write_start: self.end,
            shared: false,
            role: format!("permit of slot {}", self.slot),
            pid: 0,
        }
    }

    /// When the holder stopped being a valid holder: at its release, or at the end of its
    /// validity if that came first.
    fn valid_end(&self) -> u128 {
        self.end.min(self.valid_until)
    }
}

/// One line of a worker's record file.
#[derive(Debug, Clone)]
enum Record {
    Grant(Grant),
    /// A failed acquisition: how, and the worker's role.
    Error(String, String),
    Permit(Permit),
    /// A permit attempt that failed, and how.
    PermitError(String),
    /// A leadership: from its start to its end (resigned, or told it was lost), valid until
    /// `valid_until` at the latest, with its term.
    Leader {
        start: u128,
        end: u128,
        valid_until: u128,
        term: u64,
        worker: usize,
    },
    /// A campaign that failed, and how.
    LeaderError(String),
    /// A re-entry inside a reentrant worker's section: granted, and with the outer lease's
    /// fencing token.
    Reentry {
        granted: bool,
        same_token: bool,
    },
}

fn parse_record(worker: usize, line: &str) -> Option<Record> {
    let f: Vec<&str> = line.split_whitespace().collect();
    match *f.first()? {
        "G" => Some(Record::Grant(Grant {
            worker,
            start: f.get(1)?.parse().ok()?,
            end: f.get(2)?.parse().ok()?,
            valid_until: f.get(3)?.parse().ok()?,
            token: f.get(4)?.parse().ok()?,
            write: match *f.get(5)? {
                "1" => Some(true),
                "0" => Some(false),
                _ => Option::None,
            },
            write_start: f.get(6)?.parse().ok()?,
            shared: f.get(7) == Some(&"s"),
            role: f.get(8).unwrap_or(&"-").to_string(),
            pid: f.get(9).and_then(|p| p.parse().ok()).unwrap_or(0),
        })),
        "E" => Some(Record::Error(
            f.get(1)?.to_string(),
            f.get(2).unwrap_or(&"-").to_string(),
        )),
        "P" => Some(Record::Permit(Permit {
            worker,
            start: f.get(1)?.parse().ok()?,
            end: f.get(2)?.parse().ok()?,
            valid_until: f.get(3)?.parse().ok()?,
            slot: f.get(4)?.parse().ok()?,
            token: f.get(5)?.parse().ok()?,
        })),
        "PE" => Some(Record::PermitError(f.get(1)?.to_string())),
        "L" => Some(Record::Leader {
            start: f.get(1)?.parse().ok()?,
            end: f.get(2)?.parse().ok()?,
            valid_until: f.get(3)?.parse().ok()?,
            term: f.get(4)?.parse().ok()?,
            worker,
        }),
        "LE" => Some(Record::LeaderError(f.get(1)?.to_string())),
        "R" => Some(Record::Reentry {
            granted: *f.get(1)? == "1",
            same_token: *f.get(2)? == "1",
        }),
        _ => Option::None,
    }
}

/// What the checker found in one schedule's records.
#[derive(Default, Debug)]
struct Verdict {
    attempts: usize,
    grants: usize,
    errors: BTreeMap<String, usize>,
    /// Acquisitions and grants by the workers' role: the availability of each kind of lock.
    roles: BTreeMap<String, (usize, usize)>,
    /// Two critical sections overlapping while both holders were within their validity.
    violations: usize,
    /// Each violation's two sections, for the report.
    violating: Vec<(Grant, Grant)>,
    /// What happened around each violation (the sections, the faults and what the workers'
    /// managers logged), for the report.
    story: String,
    /// Overlaps where at least one holder had run past its validity.
    late_overlaps: usize,
    /// Two shared sections overlapping (allowed).
    shared_overlaps: usize,
    /// Critical sections that ended after their validity.
    late_sections: usize,
    /// Fenced store writes sent after the writer's validity had ended, rejected by the store.
    late_writes_rejected: usize,
    /// Late writes the store accepted because no newer holder had written yet: the store's
    /// writes stay in token order, which is all fencing promises.
    late_writes_in_order: usize,
    /// Late writes accepted after a write with a greater token had been accepted: a fencing
    /// failure (should be 0).
    late_writes_stale: usize,
    /// Fenced store writes rejected although the writer was still valid (should be 0).
    valid_writes_rejected: usize,
    secs: f64,
    /// Worker processes started, replacements included.
    processes: usize,
    /// Re-entries tried, granted, and granted with a fencing token other than the outer
    /// lease's (a tenure keeps its token while a majority keeps its data).
    reentries: usize,
    reentries_granted: usize,
    reentries_new_token: usize,
    /// Permit attempts, grants, and how the failed attempts failed.
    permit_attempts: usize,
    permit_grants: usize,
    permit_errors: BTreeMap<String, usize>,
    /// Permits held past their validity.
    late_permits: usize,
    /// Permits granted on a late permit's slot after its validity ended, while it was still
    /// held (the late holder still believed it): allowed.
    slots_retaken: usize,
    /// The most permits valid at one instant.
    permits_at_once: usize,
    /// Grants that made more than [`PERMITS`] permits valid at once (should be 0).
    permits_over: usize,
    /// Two permits of one slot overlapping while both valid (should be 0).
    slot_overlaps: usize,
    /// Permits whose fencing token was not above that of the slot's previous holder (should be
    /// 0 while a majority keeps its counters).
    slot_tokens_not_rising: usize,
    /// Campaigns, leaderships won, and how the failed campaigns failed.
    campaigns: usize,
    leaderships: usize,
    leader_errors: BTreeMap<String, usize>,
    /// Two leaderships overlapping while both valid (should be 0).
    leader_overlaps: usize,
    /// Leaderships whose term was not above the one before (should be 0 while a majority
    /// keeps its counters).
    term_regressions: usize,
}

fn check(records: &[Record], secs: f64) -> Verdict {
    let mut v = Verdict {
        secs,
        ..Verdict::default()
    };
    let mut grants: Vec<&Grant> = Vec::new();
    for r in records {
        match r {
            Record::Grant(g) => {
                let r = v.roles.entry(g.role.clone()).or_default();
                r.0 += 1;
                r.1 += 1;
                grants.push(g);
            }
            Record::Error(k, role) => {
                *v.errors.entry(k.clone()).or_default() += 1;
                v.roles.entry(role.clone()).or_default().0 += 1;
            }
            Record::Reentry {
                granted,
                same_token,
            } => {
                v.reentries += 1;
                v.reentries_granted += usize::from(*granted);
                v.reentries_new_token += usize::from(*granted && !*same_token);
                continue;
            }
            Record::Permit(_)
            | Record::PermitError(_)
            | Record::Leader { .. }
            | Record::LeaderError(_) => continue,
        }
        v.attempts += 1;
    }
    check_permits(records, PERMITS as usize, &mut v);
    check_leaders(records, &mut v);
    v.grants = grants.len();
    grants.sort();
    for (i, a) in grants.iter().enumerate() {
        if a.end > a.valid_until {
            v.late_sections += 1;
        }
        if a.write_start > a.valid_until {
            // Written after the validity ended. Fencing promises that the store never takes
            // it after a write with a greater token; before one, it may.
            match a.write {
                Some(false) => v.late_writes_rejected += 1,
                Some(true) => {
                    let newer_written_before = grants.iter().any(|b| {
                        b.write == Some(true) && b.token > a.token && b.end < a.write_start
                    });
                    if newer_written_before {
                        v.late_writes_stale += 1;
                    } else {
                        v.late_writes_in_order += 1;
                    }
                }
                Option::None => {}
            }
        } else if a.write == Some(false) {
            v.valid_writes_rejected += 1;
        }
        for b in &grants[i + 1..] {
            if b.start >= a.end {
                break; // sorted by start: no later section overlaps `a`
            }
            // [b.start, min(a.end, b.end)] is the overlap; both valid there?
            let overlap_end = a.end.min(b.end);
            let both_valid_until = a.valid_until.min(b.valid_until);
            if a.shared && b.shared {
                v.shared_overlaps += 1;
            } else if b.start < both_valid_until.min(overlap_end) {
                v.violations += 1;
                v.violating.push(((*a).clone(), (*b).clone()));
            } else {
                v.late_overlaps += 1;
            }
        }
    }
    v
}

/// The semaphore's part of [`check`]: how many of the permits were valid at once (with at most
/// `permits` allowed), per slot whether two overlapped while valid, and whether each slot's
/// tokens rose. A permit counts from its grant to the earlier of its release and the end of its
/// validity, as a lock's section does; one that ends when another starts does not overlap it.
fn check_permits(records: &[Record], permits: usize, v: &mut Verdict) {
    let mut held: Vec<&Permit> = Vec::new();
    for r in records {
        match r {
            Record::Permit(p) => held.push(p),
            Record::PermitError(k) => *v.permit_errors.entry(k.clone()).or_default() += 1,
            _ => continue,
        }
        v.permit_attempts += 1;
    }
    v.permit_grants = held.len();
    v.late_permits = held.iter().filter(|p| p.end > p.valid_until).count();
    // Sweep the valid intervals' ends (-1) and starts (+1) in time order, ends first at equal
    // times.
    let mut events: Vec<(u128, i8)> = held
        .iter()
        .filter(|p| p.valid_end() > p.start)
        .flat_map(|p| [(p.start, 1), (p.valid_end(), -1)])
        .collect();
    events.sort();
    let mut valid = 0usize;
    for (_, d) in events {
        if d < 0 {
            valid -= 1;
        } else {
            valid += 1;
            v.permits_at_once = v.permits_at_once.max(valid);
            v.permits_over += usize::from(valid > permits);
        }
    }
    held.sort_by_key(|p| (p.slot, p.start, p.end));
    for (i, a) in held.iter().enumerate() {
        let same_slot = held[i + 1..].iter().take_while(|b| b.slot == a.slot);
        for b in same_slot.clone() {
            if b.start >= a.valid_end() {
                break; // sorted by start within the slot
            }
            if b.start < b.valid_end() {
                v.slot_overlaps += 1;
                v.violating.push((a.as_grant(), b.as_grant()));
            }
        }
        for b in same_slot.clone() {
            if b.start >= a.end {
                break;
            }
            v.slots_retaken += usize::from(b.start >= a.valid_until);
        }
        if let Some(b) = same_slot.clone().next() {
            v.slot_tokens_not_rising += usize::from(b.token <= a.token);
        }
    }
}

/// The election's part of [`check`]: a leadership counts from its start to the earlier of its
/// end and its validity's; two that overlap there are a violation (reported as sections), and
/// a leadership whose term is not above the one that started before it is a term regression.
fn check_leaders(records: &[Record], v: &mut Verdict) {
    let mut held: Vec<(u128, u128, u64, usize)> = Vec::new();
    for r in records {
        match r {
            Record::Leader {
                start,
                end,
                valid_until,
                term,
                worker,
            } => held.push((*start, (*end).min(*valid_until), *term, *worker)),
            Record::LeaderError(k) => *v.leader_errors.entry(k.clone()).or_default() += 1,
            _ => continue,
        }
        v.campaigns += 1;
    }
    v.leaderships = held.len();
    held.sort();
    let section = |(start, end, term, worker): (u128, u128, u64, usize)| Grant {
        start,
        end,
        valid_until: end,
        worker,
        token: term,
        write: Option::None,
        write_start: end,
        shared: false,
        role: "leader".into(),
        pid: 0,
    };
    for (i, a) in held.iter().enumerate() {
        for b in &held[i + 1..] {
            if b.0 >= a.1 {
                break; // sorted by start
            }
            if b.0 < b.1 {
                v.leader_overlaps += 1;
                v.violating.push((section(*a), section(*b)));
            }
        }
        if let Some(b) = held.get(i + 1) {
            v.term_regressions += usize::from(b.2 <= a.2);
        }
    }
}

/// The checker on records with known answers (this file has no #[test] functions: it is its
/// own harness).
fn checker_self_check() {
    // A grant whose store write was sent at `write_start` and answered at `end`.
    let gw = |worker, start: u128, end: u128, valid_until: u128, token, write, write_start| {
        Record::Grant(Grant {
            start,
            end,
            valid_until,
            worker,
            token,
            write,
            write_start,
            shared: false,
            role: "plain".into(),
            pid: 0,
        })
    };
    let g = |worker, start, end, valid_until, token, write| {
        gw(worker, start, end, valid_until, token, write, end)
    };
    let sh = |worker, start, end, valid_until| match gw(
        worker,
        start,
        end,
        valid_until,
        1,
        Option::None,
        end,
    ) {
        Record::Grant(g) => Record::Grant(Grant { shared: true, ..g }),
        other => other,
    };
    // Shared sections overlap freely; a shared and an exclusive one must not.
    let v = check(&[sh(0, 0, 10, 20), sh(1, 5, 15, 40)], 1.0);
    assert_eq!((v.violations, v.shared_overlaps), (0, 1));
    let v = check(&[sh(0, 0, 10, 20), g(1, 5, 15, 40, 2, Some(true))], 1.0);
    assert_eq!((v.violations, v.shared_overlaps), (1, 0));
    let v = check(&[g(0, 0, 10, 20, 1, Some(true)), sh(1, 5, 15, 40)], 1.0);
    assert_eq!(v.violations, 1);
    // Disjoint sections: nothing.
    let v = check(
        &[
            g(0, 0, 10, 20, 1, Some(true)),
            g(1, 10, 20, 40, 2, Some(true)),
        ],
        1.0,
    );
    assert_eq!((v.violations, v.late_overlaps, v.grants), (0, 0, 2));
    // Overlap while both valid: a violation.
    let v = check(
        &[
            g(0, 0, 10, 20, 1, Some(true)),
            g(1, 5, 15, 40, 2, Some(true)),
        ],
        1.0,
    );
    assert_eq!((v.violations, v.late_overlaps), (1, 0));
    // Overlap only after the first ran past its validity: late, not a violation.
    let v = check(
        &[
            g(0, 0, 50, 10, 1, Some(false)),
            g(1, 20, 30, 60, 2, Some(true)),
            Record::Error("unavailable".into(), "plain".into()),
        ],
        1.0,
    );
    assert_eq!((v.violations, v.late_overlaps, v.late_sections), (0, 1, 1));
    assert_eq!((v.late_writes_rejected, v.attempts), (1, 3));
    assert_eq!(v.errors.get("unavailable"), Some(&1));
    // A late write the store accepts before the next holder has written: in token order.
    let late = gw(0, 0, 50, 10, 1, Some(true), 45);
    let v = check(&[late.clone(), g(1, 20, 60, 70, 2, Some(true))], 1.0);
    assert_eq!((v.late_writes_in_order, v.late_writes_stale), (1, 0));
    // The same write accepted after the newer holder's write: a fencing failure.
    let v = check(&[late, g(1, 20, 30, 70, 2, Some(true))], 1.0);
    assert_eq!((v.late_writes_in_order, v.late_writes_stale), (0, 1));
    // A write sent within the validity is not late, even if its answer came after.
    let v = check(&[gw(0, 0, 50, 40, 1, Some(true), 30)], 1.0);
    assert_eq!(
        (v.late_sections, v.late_writes_in_order, v.late_writes_stale),
        (1, 0, 0)
    );

    // Permits, P = 2 (the suite's).
    assert_eq!(PERMITS, 2);
    let pm = |worker, start, end, valid_until, slot, token| {
        Record::Permit(Permit {
            start,
            end,
            valid_until,
            slot,
            token,
            worker,
        })
    };
    let permits = |v: &Verdict| {
        (
            v.permits_at_once,
            v.permits_over,
            v.slot_overlaps,
            v.slot_tokens_not_rising,
        )
    };
    // P + 1 permits valid at once: one grant too many, and two of them on one slot.
    let v = check(
        &[
            pm(0, 0, 30, 100, 0, 1),
            pm(1, 10, 40, 100, 1, 1),
            pm(2, 20, 50, 100, 0, 2),
        ],
        1.0,
    );
    assert_eq!(permits(&v), (3, 1, 1, 0));
    assert_eq!((v.permit_grants, v.attempts, v.violations), (3, 0, 0));
    // The same on three slots (a bug that made a slot too many): still one over P.
    let v = check(
        &[
            pm(0, 0, 30, 100, 0, 1),
            pm(1, 10, 40, 100, 1, 1),
            pm(2, 20, 50, 100, 2, 1),
        ],
        1.0,
    );
    assert_eq!(permits(&v), (3, 1, 0, 0));
    // P at once, and others that start exactly when one ends (touching): never more than P.
    let v = check(
        &[
            pm(0, 0, 30, 100, 0, 1),
            pm(1, 10, 40, 100, 1, 1),
            pm(2, 30, 60, 100, 0, 2),
            pm(0, 40, 70, 100, 1, 2),
            pm(1, 60, 90, 200, 0, 3),
            Record::PermitError("not_acquired".into()),
        ],
        1.0,
    );
    assert_eq!(permits(&v), (2, 0, 0, 0));
    assert_eq!(
        (v.permit_attempts, v.permit_grants, v.late_permits),
        (6, 5, 0)
    );
    assert_eq!(v.slots_retaken, 0);
    assert_eq!(v.permit_errors.get("not_acquired"), Some(&1));
    // A holder past its validity (paused) no longer counts: its slot's next holder and
    // another permit make two, not three; the next holder's token must still be greater.
    let v = check(
        &[
            pm(0, 0, 90, 20, 0, 1),
            pm(1, 10, 60, 100, 1, 1),
            pm(2, 20, 50, 100, 0, 2),
        ],
        1.0,
    );
    assert_eq!(permits(&v), (2, 0, 0, 0));
    assert_eq!((v.late_permits, v.slots_retaken), (1, 1));
    let v = check(
        &[
            pm(0, 0, 90, 21, 0, 1),
            pm(1, 10, 60, 100, 1, 1),
            pm(2, 20, 50, 100, 0, 1),
        ],
        1.0,
    );
    assert_eq!(permits(&v), (3, 1, 1, 1));
    // Permits never meet the lock's checks, nor locks the semaphore's.
    let v = check(
        &[
            g(0, 0, 10, 20, 1, Some(true)),
            pm(1, 0, 10, 20, 0, 1),
            pm(2, 0, 10, 20, 1, 1),
        ],
        1.0,
    );
    assert_eq!((v.violations, v.grants, v.permits_at_once), (0, 1, 2));
    // Leaderships: one after another in rising terms is clean; a start inside another's valid
    // time is an overlap; one past the other's validity is not; a term not above the previous
    // one is a regression.
    let ld = |worker, start, end, valid_until, term| Record::Leader {
        start,
        end,
        valid_until,
        term,
        worker,
    };
    let leaders = |v: &Verdict| (v.leaderships, v.leader_overlaps, v.term_regressions);
    let v = check(&[ld(0, 0, 10, 20, 1), ld(1, 10, 30, 40, 2)], 1.0);
    assert_eq!(leaders(&v), (2, 0, 0));
    let v = check(&[ld(0, 0, 30, 40, 1), ld(1, 20, 50, 60, 2)], 1.0);
    assert_eq!(leaders(&v), (2, 1, 0));
    let v = check(&[ld(0, 0, 30, 15, 1), ld(1, 20, 50, 60, 2)], 1.0);
    assert_eq!(leaders(&v), (2, 0, 0));
    let v = check(
        &[
            ld(0, 0, 10, 20, 2),
            ld(1, 10, 30, 40, 2),
            ld(0, 30, 40, 50, 1),
        ],
        1.0,
    );
    assert_eq!(leaders(&v), (3, 0, 2));
    let v = check(&[Record::LeaderError("not_acquired".into())], 1.0);
    assert_eq!((v.campaigns, v.leaderships, v.attempts), (1, 0, 0));
}

// ---------------------------------------------------------------------------------------
// The worker process.

/// A worker's log of what the library logs (restart quarantine's decisions, above all), one
/// line each: `mono_ns pid level message`. A violation's report shows the lines of its time.
struct Trace(std::sync::Mutex<File>);

impl log::Log for Trace {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Info
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
            let pid = std::process::id();
            let _ = writeln!(f, "{} {pid} {} {}", mono_ns(), r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

fn worker(args: &[String]) -> ExitCode {
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| panic!("worker needs {k}"))
    };
    let nodes: Vec<String> = get("--nodes").split(',').map(str::to_string).collect();
    let store_url = get("--store");
    let out = PathBuf::from(get("--out"));
    let secs: f64 = get("--secs").parse().unwrap();
    let id: usize = get("--id").parse().unwrap();
    let quarantine = get("--quarantine") == "1";
    let hold_min: u64 = get("--hold-min").parse().unwrap();
    let hold_max: u64 = get("--hold-max").parse().unwrap();
    let lifetime: u64 = get("--lifetime-ms").parse().unwrap();
    let permit = get("--permit") == "1";
    let leader = get("--leader") == "1";
    if let Ok(f) = OpenOptions::new()
        .create(true)
        .append(true)
        .open(out.with_extension("trace"))
    {
        let _ = log::set_logger(Box::leak(Box::new(Trace(std::sync::Mutex::new(f)))));
        log::set_max_level(log::LevelFilter::Info);
    }
    let mgr = Redlock::new(
        redlock::Config::new(nodes.clone())
            .max_ttl(MAX_TTL)
            .restart_quarantine(quarantine)
            .retry_delay(Duration::from_millis(10))
            .stale_limit(Duration::from_millis(500))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100)),
    )
    .expect("worker manager");
    let mut store = redis::Client::open(store_url.as_str())
        .and_then(|c| c.get_connection())
        .expect("store connection");
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .expect("record file");
    let mut rng = (std::process::id() as u64) << 16 | id as u64 | 1;
    let roles = get("--roles");
    let role = if permit {
        Role::Permit
    } else {
        role(id, &roles)
    };
    let owner = (role == Role::Reentrant).then(|| format!("worker-{id}-{}", std::process::id()));
    // On cluster nodes the two resources of a multi-resource lock must share a slot: the own
    // one's hash tag is the lock's key (`redlock:shared`, untagged, hashes as a whole).
    let own = if nodes.iter().any(|n| n.starts_with("redis+cluster://")) {
        format!("{{redlock:shared}}own-{id}")
    } else {
        format!("own-{id}")
    };
    let mut end = Instant::now() + Duration::from_secs_f64(secs);
    if lifetime > 0 {
        end = end.min(Instant::now() + Duration::from_millis(lifetime));
    }
    if role == Role::Permit {
        permit_worker(&mgr, &mut file, rng, end, (hold_min, hold_max));
        return ExitCode::SUCCESS;
    }
    if leader {
        leader_worker(&mgr, &mut file, rng, end, (hold_min, hold_max));
        return ExitCode::SUCCESS;
    }
    let mut sections = 0u64;
    while Instant::now() < end {
        sections += 1;
        // Every other plain section unfenced: the plain path without a script (its sections
        // are checked for overlap like every other; they write nothing to the fenced store).
        let unfenced = role == Role::Plain && sections.is_multiple_of(2);
        // Waiting by notification (the default for a wait with a deadline), said explicitly:
        // the suite checks that waiters woken by releases keep mutual exclusion.
        let mut opts = LockOptions::new()
            .fenced(!unfenced)
            .wait(Wait::Until(Instant::now() + Duration::from_millis(300)))
            .notify(true);
        if let Some(o) = &owner {
            opts = opts.owner(o);
        }
        let got = match role {
            Role::Shared => mgr.acquire("shared", TTL, &opts.shared(true)),
            Role::Many => mgr.acquire_many(&["shared", own.as_str()], TTL, &opts.fenced(false)),
            Role::Plain | Role::Reentrant => mgr.acquire("shared", TTL, &opts),
            Role::Fair => mgr.acquire("shared", TTL, &opts.fair(true)),
            Role::Permit => unreachable!("permit workers run permit_worker"),
        };
        match got {
            Ok(lease) => {
                let start = mono_ns();
                let valid_until = start + lease.validity().as_nanos();
                let token = lease.fencing_token().unwrap_or(0);
                // Who holds the lock now, for the harness's "GC pause" (it looks the lock's
                // random token up in these files).
                // (A reentrant lock's key names its owner instead, a shared one the empty
                // owner.)
                let held_as = match role {
                    Role::Shared => "",
                    _ => owner.as_deref().unwrap_or(lease.value()),
                };
                let _ = writeln!(file, "H {held_as}");
                let _ = file.flush();
                // The critical section: some "work", then a write to the store guarded by
                // the fencing token.
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let hold = hold_min + next() % (hold_max - hold_min + 1);
                if owner.is_some() {
                    // Re-enter 1 to 5 times at once (no wait: the owner holds the lock), then
                    // release those leases in a random order; only the outer lease is left.
                    let inner = LockOptions::new().fenced(true).wait(Wait::No);
                    let inner = inner.owner(owner.as_deref().unwrap_or_default());
                    let mut held = Vec::new();
                    for _ in 0..1 + next() % 5 {
                        let r = mgr.acquire("shared", TTL, &inner);
                        let same = r.as_ref().is_ok_and(|l| l.fencing_token() == Some(token));
                        let _ = writeln!(file, "R {} {}", u8::from(r.is_ok()), u8::from(same));
                        held.extend(r.ok());
                    }
                    thread::sleep(Duration::from_millis(hold / 2));
                    while !held.is_empty() {
                        let i = next() as usize % held.len();
                        let _ = held.swap_remove(i).unlock();
                    }
                    thread::sleep(Duration::from_millis(hold - hold / 2));
                } else {
                    thread::sleep(Duration::from_millis(hold));
                }
                let write_start = mono_ns();
                // A reentrant owner's sections may be one tenure (while any hold of it stays
                // on a quorum), which share a token: its store accepts the same token again.
                let store_write = if owner.is_some() {
                    scripts::FENCED_STORE_WRITE_REENTRANT
                } else {
                    scripts::FENCED_STORE_WRITE
                };
                // Readers do not write, and a multi-resource lease has no fencing token.
                let accepted: Result<i64, _> = match role {
                    Role::Shared | Role::Many | Role::Permit => Ok(-1),
                    Role::Plain if unfenced => Ok(-1),
                    Role::Plain | Role::Reentrant | Role::Fair => redis::cmd("EVAL")
                        .arg(store_write)
                        .arg(1)
                        .arg("store:shared")
                        .arg(token)
                        .arg(format!("worker {id}"))
                        .query(&mut store),
                };
                let end_ns = mono_ns();
                let w = match accepted {
                    Ok(1) => "1",
                    Ok(0) => "0",
                    _ => "-",
                };
                let mode = if role == Role::Shared { "s" } else { "x" };
                let _ = writeln!(
                    file,
                    "G {start} {end_ns} {valid_until} {token} {w} {write_start} {mode} {} {}",
                    role.name(),
                    std::process::id()
                );
                let _ = lease.unlock();
            }
            Err(e) => {
                let _ = writeln!(file, "E {} {}", error_kind(&e), role.name());
                thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = file.flush();
    }
    ExitCode::SUCCESS
}

/// How a worker's log names a failed acquisition.
fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::NotAcquired(_) => "not_acquired",
        Error::Unavailable(_) => "unavailable",
        _ => "other",
    }
}

/// A permit worker's loop: permits of [`SEMAPHORE`], each held for a critical section of
/// `hold` ms (no store write: a permit's token is no lock's), until `end`. The section is logged
/// as a lock's is: `P start end valid_until slot token`, `start` taken when the grant returned
/// and `end` before the release, so the logged interval lies within the permit's hold; `H
/// permit` before the section, for the harness's "GC pause" (the holder's last line).
fn permit_worker(mgr: &Redlock, file: &mut File, mut rng: u64, end: Instant, hold: (u64, u64)) {
    let sem = mgr.semaphore(SEMAPHORE, PERMITS).expect("semaphore");
    while Instant::now() < end {
        // Waiting as the lock workers do: by notification, woken by a permit's release.
        let opts = LockOptions::new()
            .fenced(true)
            .wait(Wait::Until(Instant::now() + Duration::from_millis(300)))
            .notify(true);
        match sem.acquire(TTL, &opts) {
            Ok(lease) => {
                let start = mono_ns();
                let valid_until = start + lease.validity().as_nanos();
                let token = lease.fencing_token().unwrap_or(0);
                let (slot, permits) = lease.permit().expect("a permit's lease");
                assert_eq!(permits, PERMITS);
                let _ = writeln!(file, "H permit");
                let _ = file.flush();
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                thread::sleep(Duration::from_millis(hold.0 + rng % (hold.1 - hold.0 + 1)));
                let end_ns = mono_ns();
                let _ = writeln!(file, "P {start} {end_ns} {valid_until} {slot} {token}");
                let _ = lease.unlock();
            }
            Err(e) => {
                let _ = writeln!(file, "PE {}", error_kind(&e));
                thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = file.flush();
    }
}

/// A leader worker's loop: campaigns in [`ELECTION`] (waiting as the lock workers do), then
/// leads for `hold` ms, three times over (the leadership renews itself meanwhile), checking
/// every 10 ms that it still leads and noting until when it is valid at least; resigns, or
/// stops when told it lost. Logged as `L start end valid_until term` (or `LE kind`).
fn leader_worker(mgr: &Redlock, file: &mut File, mut rng: u64, end: Instant, hold: (u64, u64)) {
    let election = mgr.election(ELECTION);
    while Instant::now() < end {
        let opts = LockOptions::new()
            .wait(Wait::Until(Instant::now() + Duration::from_millis(300)))
            .notify(true);
        match election.campaign("leader", TTL, &opts) {
            Ok(l) => {
                let start = mono_ns();
                let mut valid_until = start + l.validity().as_nanos();
                let term = l.term();
                let _ = writeln!(file, "H leader");
                let _ = file.flush();
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let lead = 3 * (hold.0 + rng % (hold.1 - hold.0 + 1));
                let until = Instant::now() + Duration::from_millis(lead);
                while Instant::now() < until {
                    let now = mono_ns();
                    let left = l.validity();
                    if l.lost() || left.is_zero() {
                        break;
                    }
                    valid_until = now + left.as_nanos();
                    thread::sleep(Duration::from_millis(10));
                }
                let end_ns = mono_ns();
                let _ = writeln!(file, "L {start} {end_ns} {valid_until} {term}");
                let _ = l.resign();
            }
            Err(e) => {
                let _ = writeln!(file, "LE {}", error_kind(&e));
                thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = file.flush();
    }
}

// ---------------------------------------------------------------------------------------
// The harness.

struct Run {
    servers: Vec<RedisServer>,
    /// In cluster-reshard, each node is a cluster (and `servers` is empty).
    clusters: Vec<RedisCluster>,
    store: RedisServer,
    proxies: Vec<DelayProxy>,
    /// In the failover schedules, node `i < GROUPS` is a group: `servers[i]` its master now.
    groups: Vec<Group>,
    dir: PathBuf,
}

/// A failover group behind one address, as a managed service's primary endpoint: the master
/// (`Run::servers[i]`), a replica that lags [`REPLICA_LAG`] behind it, and the address the
/// workers use (`front`), which a failover moves to the promoted replica.
struct Group {
    replica: RedisServer,
    /// The replica's replication link to the master (the lag).
    link: DelayProxy,
    front: DelayProxy,
}

impl Group {
    fn start(master: &RedisServer) -> Group {
        let link = DelayProxy::start(master.port, REPLICA_LAG);
        let replica = RedisServer::start();
        replicate(&replica, link.port);
        Group {
            replica,
            link,
            front: DelayProxy::start(master.port, Duration::ZERO),
        }
    }

    /// The master dies; the replica is promoted (missing what it had not received yet) and
    /// the address moves to it; the old master comes back empty, as the new one's replica.
    fn failover(&mut self, master: &mut RedisServer) {
        master.kill();
        redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .exec(&mut self.replica.client())
            .expect("promote the replica");
        self.front.move_to(self.replica.port);
        std::mem::swap(master, &mut self.replica);
        self.replica.restart();
        self.link.move_to(master.port);
        replicate(&self.replica, self.link.port);
    }
}

/// Moves `key`'s slot to the other primary of `c` (a cluster of two), keys and all, the way
/// `redis-cli --cluster reshard` does: `IMPORTING`/`MIGRATING`, `MIGRATE` of its keys, then
/// `SETSLOT NODE` everywhere. Workers meet `ASK` while it moves and `MOVED` after.
fn reshard(c: &RedisCluster, key: &[u8]) {
    let slot = redlock::slot::key_slot(key);
    let owner = (c.slot_ranges().into_iter())
        .find(|(from, to, _)| (*from..=*to).contains(&slot))
        .map(|r| r.2)
        .expect("every slot is served");
    let from = c.at(owner);
    let to = c
        .servers
        .iter()
        .find(|s| s.port != owner)
        .expect("two primaries");
    let m = c.migrate(slot, from, to);
    thread::sleep(Duration::from_millis(50));
    m.move_keys();
    thread::sleep(Duration::from_millis(50));
    m.finish();
}

/// `REPLICAOF 127.0.0.1 port` on `s`.
fn replicate(s: &RedisServer, port: u16) {
    redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(port)
        .exec(&mut s.client())
        .expect("REPLICAOF");
}

fn signal(pid: Option<i32>, sig: i32) {
    if let Some(pid) = pid {
        // SAFETY: kill(2) on the PID of a child this harness spawned and has not reaped.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Stops worker `id` (process `pid`) and keeps it stopped only if it stopped inside a section:
/// its log, frozen now, ends in the section's `H` line (re-entries' `R` lines aside). Otherwise
/// (a busy machine may let it release between the look-up and the signal) it goes on at once,
/// and the harness tries again soon instead of pausing a worker outside its lease.
fn stop_in_section(dir: &Path, id: usize, pid: i32) -> Option<i32> {
    signal(Some(pid), libc::SIGSTOP);
    let state = || fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // State `T` once it has stopped (the field after the parenthesised name).
    let stopped = support::eventually(Duration::from_secs(5), || {
        state()
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('T')
    });
    let in_section = stopped
        && fs::read_to_string(dir.join(format!("worker{id}.log"))).is_ok_and(|s| {
            let last = s.lines().rev().find(|l| !l.starts_with("R "));
            last.is_some_and(|l| l.starts_with("H "))
        });
    if in_section {
        return Some(pid);
    }
    signal(Some(pid), libc::SIGCONT);
    Option::None
}

/// Runs schedule `s` for `secs` with `workers` lock workers (ids from 0), `permit_workers`
/// permit workers (the ids after them) and `leader_workers` leader workers (the ids after
/// those).
fn run_schedule(
    s: Schedule,
    secs: f64,
    (workers, permit_workers, leader_workers): (usize, usize, usize),
    roles: &str,
) -> Verdict {
    // A worker pause needs a holder to find and time after it for newer holders to write: at
    // least two tries at it, however short the other schedules are (on a busy machine the lock
    // is often between holders when the harness looks).
    let secs = if s == WorkerPause {
        secs.max(MIN_PAUSE_SCHEDULE_SECS)
    } else {
        secs
    };
    let args: Vec<&str> = if s.aof() {
        vec!["--appendonly", "yes", "--appendfsync", "always"]
    } else {
        vec![]
    };
    let dir = std::env::temp_dir().join(format!(
        "redlock-faults-{}-{}",
        std::process::id(),
        s.name()
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let clustered = s == ClusterReshard;
    let mut run = Run {
        servers: (0..NODES)
            .filter(|_| !clustered)
            .map(|_| RedisServer::start_with(&args))
            .collect(),
        clusters: (0..NODES)
            .filter(|_| clustered)
            .map(|_| thread::spawn(|| RedisCluster::start(2, 0)))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().expect("start a cluster"))
            .collect(),
        store: RedisServer::start(),
        proxies: Vec::new(),
        groups: Vec::new(),
        dir,
    };
    let mut urls: Vec<String> = run.servers.iter().map(|s| s.url()).collect();
    urls.extend(
        (run.clusters.iter()).map(|c| format!("redis+cluster://127.0.0.1:{}", c.servers[0].port)),
    );
    if s.failover() {
        for (i, url) in urls.iter_mut().enumerate().take(GROUPS) {
            let g = Group::start(&run.servers[i]);
            *url = g.front.url();
            run.groups.push(g);
        }
    }
    if s == Latency {
        // Every quorum needs a node 16 ms or more away.
        for (i, ms) in [(1, 3), (2, 8), (3, 15), (4, 20)] {
            let p = DelayProxy::start(run.servers[i].port, Duration::from_millis(ms));
            urls[i] = p.url();
            run.proxies.push(p);
        }
    }
    // No aging: the nodes were just started, a brand-new cluster, which the workers' managers
    // trust at once (restart quarantine on, as by default, except where noted).
    let start = Instant::now();
    let t0 = mono_ns();
    // The faults injected, with when (for a violation's report).
    let mut events: Vec<(u128, String)> = Vec::new();
    let end = start + Duration::from_secs_f64(secs);
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15 ^ s as u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // The permit workers' draws come from a stream of their own, so that the lock's side of
    // each schedule (its workers' lifetimes, which nodes fail and when) is what it was before
    // they were added.
    let mut permit_rng: u64 = 0x2545_f491_4f6c_dd1d ^ s as u64;
    let mut next_permit = move || {
        permit_rng ^= permit_rng << 13;
        permit_rng ^= permit_rng >> 7;
        permit_rng ^= permit_rng << 17;
        permit_rng
    };
    let spawn = |id: usize, lifetime: u64| {
        let left = end.saturating_duration_since(Instant::now()).as_secs_f64();
        Command::new(std::env::current_exe().unwrap())
            .args([
                "worker",
                "--id",
                &id.to_string(),
                "--secs",
                &left.to_string(),
            ])
            .args(["--nodes", &urls.join(","), "--store", &run.store.url()])
            .args(["--quarantine", if s.quarantine() { "1" } else { "0" }])
            .args(["--hold-min", &s.hold_ms().0.to_string()])
            .args(["--hold-max", &s.hold_ms().1.to_string()])
            .args(["--lifetime-ms", &lifetime.to_string()])
            .args([
                "--permit",
                if (workers..workers + permit_workers).contains(&id) {
                    "1"
                } else {
                    "0"
                },
            ])
            .args([
                "--leader",
                if id >= workers + permit_workers {
                    "1"
                } else {
                    "0"
                },
            ])
            .args(["--roles", roles])
            .arg("--out")
            .arg(run.dir.join(format!("worker{id}.log")))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn worker")
    };
    let lifetime = |r: u64| {
        if s.recreate_workers() {
            500 + r % 1000
        } else {
            0
        }
    };
    let all = workers + permit_workers + leader_workers;
    let mut children: Vec<Child> = (0..all)
        .map(|id| {
            let r = if id < workers { next() } else { next_permit() };
            spawn(id, lifetime(r))
        })
        .collect();
    let mut spawned = all;

    // Faults, until the workers' time is up.
    while Instant::now() + Duration::from_millis(300) < end {
        if s.recreate_workers() {
            // Replace the workers whose lifetime is over with new processes (new managers).
            for (id, c) in children.iter_mut().enumerate() {
                if matches!(c.try_wait(), Ok(Some(_)))
                    && Instant::now() + Duration::from_millis(300) < end
                {
                    let r = if id < workers { next() } else { next_permit() };
                    *c = spawn(id, lifetime(r));
                    spawned += 1;
                }
            }
        }
        match s {
            None | Latency => thread::sleep(Duration::from_millis(100)),
            KillDelayedRestart => {
                thread::sleep(Duration::from_millis(500));
                let i = next() as usize % NODES;
                run.servers[i].kill();
                events.push((mono_ns(), format!("node {i} killed")));
                thread::sleep(MAX_TTL + Duration::from_millis(1200));
                run.servers[i].restart();
                events.push((mono_ns(), format!("node {i} back, empty")));
            }
            KillRestartNowUnprotected | KillRestart | KillWithAof => {
                thread::sleep(Duration::from_millis(150 + next() % 200));
                let i = next() as usize % NODES;
                events.push((mono_ns(), format!("node {i} killed")));
                run.servers[i].restart(); // kill -9, then at once back
                events.push((mono_ns(), format!("node {i} back")));
            }
            Failover | FailoverUnprotected => {
                thread::sleep(Duration::from_millis(300 + next() % 300));
                let i = next() as usize % GROUPS;
                events.push((mono_ns(), format!("node {i} failing over")));
                run.groups[i].failover(&mut run.servers[i]);
                events.push((mono_ns(), format!("node {i} failed over")));
            }
            ClusterReshard => {
                thread::sleep(Duration::from_millis(300 + next() % 300));
                let c = &run.clusters[next() as usize % NODES];
                // The lock's slot (every key of the lock and its companions) or the
                // semaphore's, to the other primary, with its keys.
                let key: &[u8] = if next() % 2 == 0 {
                    b"redlock:shared"
                } else {
                    b"redlock-sem:redlock:faults-sem"
                };
                reshard(c, key);
                events.push((
                    mono_ns(),
                    format!("resharded {}", String::from_utf8_lossy(key)),
                ));
            }
            KillMajorityRestart => {
                // Long enough apart that the quarantine ends in between, now and then.
                thread::sleep(Duration::from_millis(1500 + next() % 1000));
                let first = next() as usize % NODES;
                for k in 0..3 {
                    run.servers[(first + k) % NODES].restart();
                    events.push((mono_ns(), format!("node {} restarted", (first + k) % NODES)));
                }
            }
            PauseMinority | PauseMajority => {
                thread::sleep(Duration::from_millis(500));
                let n = if s == PauseMinority { 2 } else { 3 };
                let first = next() as usize % NODES;
                let which: Vec<usize> = (0..n).map(|k| (first + k) % NODES).collect();
                for &i in &which {
                    run.servers[i].pause();
                }
                events.push((mono_ns(), format!("nodes {which:?} paused")));
                thread::sleep(TTL * 3);
                for &i in &which {
                    run.servers[i].resume();
                }
                events.push((mono_ns(), format!("nodes {which:?} resumed")));
            }
            WorkerPause => {
                // Stop the worker that holds the lock right now, for longer than its TTL: it
                // wakes up believing it holds the lock, and writes.
                thread::sleep(Duration::from_millis(300 + next() % 300));
                // Only where the other workers still run long enough after the pause to take
                // the lock and write: otherwise the late write meets no newer one.
                if Instant::now() + TTL * 2 + Duration::from_millis(800) > end {
                    continue;
                }
                // The lock may be between holders: look again, for up to a second.
                let holder = (0..50).find_map(|_| {
                    let h =
                        lock_value(&run.servers[0]).and_then(|t| holder_of(&run.dir, workers, &t));
                    if h.is_none() {
                        thread::sleep(Duration::from_millis(20));
                    }
                    h
                });
                let lock_pid =
                    holder.and_then(|w| stop_in_section(&run.dir, w, children[w].id() as i32));
                // And, once the lock's holder is stopped, a permit holder, so that its slot is
                // taken by another worker while it still believes it holds the permit. Every
                // pause lasts longer than the TTL.
                let first = next_permit() as usize;
                let permit_holder = (0..10).find_map(|_| {
                    let h = permit_holder_of(&run.dir, workers..all, first);
                    if h.is_none() {
                        thread::sleep(Duration::from_millis(20));
                    }
                    h
                });
                let permit_pid = permit_holder
                    .and_then(|w| stop_in_section(&run.dir, w, children[w].id() as i32));
                if lock_pid.is_some() || permit_pid.is_some() {
                    thread::sleep(TTL + Duration::from_millis(500));
                }
                signal(lock_pid, libc::SIGCONT);
                signal(permit_pid, libc::SIGCONT);
            }
        }
    }
    for c in &mut children {
        signal(Some(c.id() as i32), libc::SIGCONT);
        let _ = c.wait();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut records = Vec::new();
    for id in 0..all {
        let path = run.dir.join(format!("worker{id}.log"));
        if let Ok(f) = File::open(&path) {
            records.extend(
                BufReader::new(f)
                    .lines()
                    .map_while(Result::ok)
                    .filter_map(|l| parse_record(id, &l)),
            );
        }
    }
    let mut v = check(&records, elapsed);
    v.story = story(&v.violating, &events, &run.dir, t0);
    let _ = fs::remove_dir_all(&run.dir);
    drop(run);
    Verdict {
        processes: spawned,
        ..v
    }
}

/// The report of the first violations: both sections, then the faults and the managers' log
/// lines from 3 s before the earlier section to the end of the later one, times in ms from
/// the schedule's start.
fn story(violating: &[(Grant, Grant)], events: &[(u128, String)], dir: &Path, t0: u128) -> String {
    let ms = |t: u128| (t as f64 - t0 as f64) / 1e6;
    let mut trace: Vec<(u128, String)> = Vec::new();
    if !violating.is_empty()
        && let Ok(entries) = fs::read_dir(dir)
    {
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "trace")
                && let Ok(text) = fs::read_to_string(&path)
            {
                let name = path.file_stem().map(|n| n.to_string_lossy().into_owned());
                for l in text.lines() {
                    if let Some((t, rest)) = l.split_once(' ')
                        && let Ok(t) = t.parse()
                    {
                        trace.push((t, format!("{} {rest}", name.as_deref().unwrap_or("?"))));
                    }
                }
            }
        }
    }
    trace.sort();
    let mut out = String::new();
    for (a, b) in violating.iter().take(2) {
        for g in [a, b] {
            let _ = writeln!(
                out,
                "  worker {} (pid {}, {}, token {}): held {:.1}–{:.1} ms, valid until {:.1} ms",
                g.worker,
                g.pid,
                g.role,
                g.token,
                ms(g.start),
                ms(g.end),
                ms(g.valid_until)
            );
        }
        let from = a.start.min(b.start).saturating_sub(3_000_000_000);
        let to = a.end.max(b.end);
        let mut lines: Vec<(u128, String)> = (events.iter())
            .filter(|(t, _)| (from..=to).contains(t))
            .map(|(t, e)| (*t, format!("harness: {e}")))
            .collect();
        lines.extend(
            trace
                .iter()
                .filter(|(t, _)| (from..=to).contains(t))
                .cloned(),
        );
        lines.sort();
        for (t, l) in lines.iter().take(400) {
            let _ = writeln!(out, "    {:>9.1} {l}", ms(*t));
        }
    }
    out
}

/// A permit worker among `ids` (tried from the `first`-th on, round) whose log ends inside a
/// section: its last line is `H permit`.
fn permit_holder_of(dir: &Path, ids: std::ops::Range<usize>, first: usize) -> Option<usize> {
    let n = ids.len();
    (0..n).map(|k| ids.start + (first + k) % n).find(|id| {
        fs::read_to_string(dir.join(format!("worker{id}.log")))
            .is_ok_and(|s| s.lines().last() == Some("H permit"))
    })
}

/// What names the lock's holder on a node: a plain lock's token, or a reentrant lock's owner.
fn lock_value(s: &RedisServer) -> Option<Vec<u8>> {
    let mut c = s.client();
    let key = "redlock:shared";
    let ty: String = redis::cmd("TYPE").arg(key).query(&mut c).ok()?;
    let cmd = match ty.as_str() {
        "string" => redis::cmd("GET").arg(key).clone(),
        "hash" => redis::cmd("HGET").arg(key).arg("owner").clone(),
        _ => return Option::None,
    };
    cmd.query(&mut c).ok().flatten()
}

/// The worker whose log says it holds the lock with random token (or owner) `token`.
fn holder_of(dir: &Path, workers: usize, token: &[u8]) -> Option<usize> {
    let wanted = format!("H {}", String::from_utf8_lossy(token));
    (0..workers).find(|id| {
        fs::read_to_string(dir.join(format!("worker{id}.log")))
            .is_ok_and(|s| s.lines().any(|l| l == wanted))
    })
}

/// The share of the plain and the fair workers' acquisitions that were granted.
fn availability(v: &Verdict) -> String {
    let share = |role: &str| match v.roles.get(role) {
        Some((attempts, grants)) if *attempts > 0 => {
            format!("{:.0} %", 100.0 * *grants as f64 / *attempts as f64)
        }
        _ => "—".to_string(),
    };
    format!("{} / {}", share("plain"), share("fair"))
}

fn table_row(s: Schedule, v: &Verdict) -> String {
    let errors = |e: &BTreeMap<String, usize>| {
        if e.is_empty() {
            "—".to_string()
        } else {
            e.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    format!(
        "| {} | {} | {} | {:.0}/s | {} | {} | {} / {} / {} | **{}** | {} | {} | {} | {} / {} / **{}** | {} | {} / {} / {} / {} | {} | **{}** | **{}** / **{}** / **{}** | {} |",
        s.name(),
        v.attempts,
        v.grants,
        v.grants as f64 / v.secs,
        availability(v),
        errors(&v.errors),
        v.reentries,
        v.reentries_granted,
        v.reentries_new_token,
        v.violations,
        v.shared_overlaps,
        v.late_overlaps,
        v.late_sections,
        v.late_writes_rejected,
        v.late_writes_in_order,
        v.late_writes_stale,
        v.valid_writes_rejected,
        v.permit_attempts,
        v.permit_grants,
        v.late_permits,
        v.slots_retaken,
        errors(&v.permit_errors),
        v.permits_at_once,
        v.permits_over,
        v.slot_overlaps,
        v.slot_tokens_not_rising,
        s.expected()
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        return worker(&args[1..]);
    }
    // Options; anything else (cargo's test flags) is ignored.
    let mut secs = 4.0;
    let mut workers = 7;
    let mut permit_workers = 3;
    let mut leader_workers = 2;
    let mut roles = "mixed".to_string();
    let mut only: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--secs" => secs = it.next().and_then(|v| v.parse().ok()).expect("--secs S"),
            "--workers" => workers = it.next().and_then(|v| v.parse().ok()).expect("--workers N"),
            "--permit-workers" => {
                permit_workers = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--permit-workers N")
            }
            "--leader-workers" => {
                leader_workers = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--leader-workers N")
            }
            "--schedule" => only.push(it.next().expect("--schedule NAME").clone()),
            "--roles" => {
                roles = it.next().expect("--roles mixed|plain|fair").clone();
                assert!(
                    ["mixed", "plain", "fair"].contains(&roles.as_str()),
                    "--roles mixed|plain|fair"
                );
            }
            "--list" => {
                // `cargo test -- --list`: one "test".
                println!("faults: test");
                return ExitCode::SUCCESS;
            }
            _ => {}
        }
    }
    checker_self_check();
    support::redis_server_binary();
    let schedules: Vec<Schedule> = ALL
        .iter()
        .copied()
        .filter(|s| only.is_empty() || only.iter().any(|o| o == s.name()))
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} nodes, {workers} worker processes, {secs} s per schedule (worker-gc-pause at least {MIN_PAUSE_SCHEDULE_SECS} s), TTL {} ms, max TTL {} ms, \
         fenced locks ({}), \
         and {permit_workers} more worker processes taking fenced permits of one semaphore of \
         {PERMITS} permits (one of them paused with the lock's holder in worker-gc-pause), \
         critical sections of 20–200 ms (300–800 ms in the kill-restart and failover \
         schedules, whose workers are replaced by new processes every 0.5–1.5 s); in the \
         failover schedules nodes 0–{} are each a master and a replica {} ms behind it behind one \
         address, failed over every 0.3–0.6 s",
        NODES,
        TTL.as_millis(),
        MAX_TTL.as_millis(),
        match roles.as_str() {
            "plain" => "every lock worker plain, fenced and unfenced in turn",
            "fair" => "every lock worker fair",
            _ => {
                "of every seven workers one plain (fenced and unfenced in turn), two reentrant re-entering 1–5 times in each \
                 section, two shared, one multi-resource and unfenced, one fair"
            }
        },
        GROUPS - 1,
        REPLICA_LAG.as_millis(),
    );
    let _ = writeln!(
        out,
        "\n| schedule | attempts | grants | throughput | granted: plain / fair | errors | re-entries: tried / granted / \
         new token | violations | shared overlaps | late overlaps | late sections | late writes: rejected / \
         accepted before a newer write / stale accepted | valid writes rejected | permits: \
         attempts / grants / late / slot retaken from a late holder | permit errors | most \
         permits valid at once (P = {PERMITS}) | permit violations: over P / one slot twice / \
         slot token not rising | expected |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|---|---:|---|---|---:|---|---|"
    );
    let mut failed = Vec::new();
    for s in schedules {
        let v = run_schedule(s, secs, (workers, permit_workers, leader_workers), &roles);
        let row = table_row(s, &v);
        println!("{row}");
        let _ = writeln!(out, "{row}");
        if s.safe() && v.violations > 0 {
            failed.push(format!("{}: {} violations", s.name(), v.violations));
            println!("{}: violations:\n{}", s.name(), v.story);
        }
        if v.late_writes_stale > 0 {
            failed.push(format!(
                "{}: {} late writes accepted after a newer holder's write",
                s.name(),
                v.late_writes_stale
            ));
        }
        if v.valid_writes_rejected > 0 && s.keeps_data() {
            failed.push(format!(
                "{}: {} writes by valid holders rejected",
                s.name(),
                v.valid_writes_rejected
            ));
        }
        if s == WorkerPause && v.late_sections == 0 {
            failed.push(format!(
                "{}: no worker was paused inside its lease",
                s.name()
            ));
        }
        if s.safe() && v.permits_over + v.slot_overlaps > 0 {
            println!("{}: permit violations:\n{}", s.name(), v.story);
            failed.push(format!(
                "{}: more than {PERMITS} permits valid at once {} times (at most {}), one slot's \
                 permits overlapping while valid {} times",
                s.name(),
                v.permits_over,
                v.permits_at_once,
                v.slot_overlaps
            ));
        }
        if v.slot_tokens_not_rising > 0 && s.keeps_data() {
            failed.push(format!(
                "{}: {} permits' fencing tokens not above their slot's previous holder's",
                s.name(),
                v.slot_tokens_not_rising
            ));
        }
        if s == None && v.permits_at_once < PERMITS as usize {
            failed.push(format!(
                "{}: {} permit grants, never {PERMITS} valid at once",
                s.name(),
                v.permit_grants
            ));
        }
        if v.permit_grants == 0 && s != PauseMajority {
            failed.push(format!("{}: no permit granted", s.name()));
        }
        if s == WorkerPause && v.late_permits == 0 {
            failed.push(format!(
                "{}: no permit worker was paused inside its permit",
                s.name()
            ));
        }
        if s.safe() && v.leader_overlaps > 0 {
            println!("{}: leader violations:\n{}", s.name(), v.story);
            failed.push(format!(
                "{}: two leaders valid at once {} times",
                s.name(),
                v.leader_overlaps
            ));
        }
        if v.term_regressions > 0 && s.keeps_data() {
            failed.push(format!(
                "{}: {} leaders' terms not above the previous leader's",
                s.name(),
                v.term_regressions
            ));
        }
        if v.leaderships == 0 && leader_workers > 0 && s != PauseMajority {
            failed.push(format!("{}: no leader elected", s.name()));
        }
        println!(
            "{}: leaders: {} campaigns ({:?} failed), {} leaderships, {} overlapping, {} term \
             regressions",
            s.name(),
            v.campaigns,
            v.leader_errors,
            v.leaderships,
            v.leader_overlaps,
            v.term_regressions
        );
        if s.recreate_workers() && v.processes <= workers + permit_workers + leader_workers {
            failed.push(format!("{}: no worker process was replaced", s.name()));
        }
        // Mixed with barging plain workers, the one fair worker may be granted nothing in a
        // short run; alone, fair workers must be.
        if s == None && roles == "fair" && v.roles.get("fair").is_none_or(|r| r.1 == 0) {
            failed.push(format!("{}: no fair lock was granted", s.name()));
        }
        if s == None && roles == "mixed" && v.reentries_granted == 0 {
            failed.push(format!("{}: no re-entry was granted", s.name()));
        }
        // Where nodes stall (pauses, delays, restarts) a re-entry may come after the outer
        // lease's keys expired and is then a new grant, with a new token.
        if s == None && v.reentries_new_token > 0 {
            failed.push(format!(
                "{}: {} fenced re-entries did not keep the tenure's token",
                s.name(),
                v.reentries_new_token
            ));
        }
        if v.grants == 0 && s != PauseMajority {
            failed.push(format!("{}: no grant at all", s.name()));
        }
    }
    println!("\n{out}");
    let report = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/faults-report.md");
    let _ = fs::write(&report, &out);
    if failed.is_empty() {
        println!("faults: ok (report in {})", report.display());
        ExitCode::SUCCESS
    } else {
        println!("faults: FAILED: {}", failed.join("; "));
        ExitCode::FAILURE
    }
}
