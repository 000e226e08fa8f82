// The README's quickstart, type-checked by `tsc --noEmit` in CI and run by the tests
// (REDLOCK_NODES: comma-separated node URLs).
import {
  Redlock, Lease, NotAcquiredError, CancelledError, RedlockError, Leadership, Leader,
  MAX_LEADER_VALUE,
} from 'redlock-quorum';

const nodes = (process.env.REDLOCK_NODES ?? 'redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003')
  .split(',');

/** Stands in for your database: it refuses a write whose fencing token is not newer. */
class Store {
  rows = new Map<string, { value: number; fence: bigint }>();
  write(key: string, value: number, fence: bigint): void {
    const row = this.rows.get(key);
    if (row && fence <= row.fence) throw new Error(`${key}: fencing token ${fence} is stale`);
    this.rows.set(key, { value, fence });
  }
}

const store = new Store();
const mgr = new Redlock(nodes, { retryCount: 3, retryDelayMs: 200 });

// Lock, extend, release.
const lease: Lease = await mgr.acquire('orders:42', 10_000);
console.log('validity', lease.validityMs > 0);
await lease.extend(10_000);
await lease.release();

// Wait up to 2 s; a fenced lock's token goes to the store.
try {
  const lk = await mgr.acquire('account:7', 5_000, { waitMs: 2_000, fenced: true });
  store.write('account:7', 100, lk.fencingToken!);
  await lk.release();
} catch (e) {
  if (e instanceof NotAcquiredError) console.log('held elsewhere:', e.nodes.map((n) => n.outcome));
  else throw e;
}

// using: renewed while the routine runs, signal aborted if the lease is lost, always released.
const total = await mgr.using('report:daily', 5_000, { fenced: true }, async (signal, lk) => {
  if (signal.aborted) throw signal.reason;
  store.write('report:daily', 1, lk.fencingToken!);
  return 42;
});
console.log('using returned', total);

// A wait cancelled by an AbortSignal.
const holder = await mgr.acquire('busy', 10_000);
try {
  await mgr.acquire('busy', 5_000, { waitMs: 30_000, signal: AbortSignal.timeout(100) });
} catch (e) {
  console.log('cancelled:', e instanceof CancelledError);
}
await holder.release();

// `await using` releases at the end of the block.
{
  await using scoped = await mgr.acquire('scoped', 5_000);
  console.log('scoped', scoped.renewing);
}

// The family: reentrant, shared, fair, several resources, semaphores, holders, metrics.
const a = await mgr.acquire('job', 5_000, { owner: 'worker-1' });
const b = await mgr.acquire('job', 5_000, { owner: 'worker-1' });
await Promise.all([a.release(), b.release()]);
const readers = await Promise.all([1, 2].map(() => mgr.acquire('config', 5_000, { shared: true })));
for (const r of readers) await r.release();
const fair = await mgr.acquire('queue', 5_000, { fair: true, waitMs: 1_000 });
await fair.release();
const set = await mgr.acquireMany(['a', 'b', 'c'], 5_000);
await set.release();
const permit = await mgr.semaphore('exports', 4).acquire(5_000, { waitMs: 1_000 });
console.log('permit slot', permit.permit?.slot);
await permit.release();
const who = await mgr.holders('orders:42');
console.log('locked', who.locked);
const text: string = mgr.metrics();
console.log('metrics', text.startsWith('# HELP'));
const errs: Array<typeof RedlockError> = [NotAcquiredError, CancelledError];
console.log(errs.length, mgr.nodeStates().length);

// Leader election: campaign, read, observe, proclaim, resign.
const election = mgr.election('scheduler');
const observing = new AbortController();
const observer = (async () => {
  for await (const l of election.observe({ signal: observing.signal })) {
    const seen: Leader = l;
    console.log('leader', seen.term, seen.value.toString(), seen.validityMs);
  }
})();
const leadership: Leadership = await election.campaign('10.0.0.7:80', 10_000, { waitMs: 5_000 });
store.write('leader', 1, leadership.term);
await leadership.proclaim(Buffer.from('10.0.0.7:81'));
const now: Leader | null = await election.leader();
console.log('leads', now?.term === leadership.term, leadership.lostSignal.aborted, MAX_LEADER_VALUE);
console.log('lost', await leadership.waitLost(10), leadership.validityMs, leadership.lostReason);
await leadership.resign();
const term = await election.lead('10.0.0.8:80', 10_000, async (signal, ld) => {
  if (signal.aborted) throw signal.reason;
  return ld.term;
});
{
  await using scopedLeader = await election.campaign('10.0.0.9:80', 10_000, {
    onLost: (ld) => console.log('lost', ld.lostReason),
  });
  console.log('term', scopedLeader.term > term);
}
const change: Leader | null = await election.waitChange(term, 100);
console.log('change', change?.term);
observing.abort();
await observer;
