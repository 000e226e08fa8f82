import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redlock, NotAcquiredError, NotHeldError, InvalidArgumentError } from '../index.mjs';
import { startNodes } from './support/redis.mjs';

let nodes;
let mgr;
before(async () => {
  nodes = await startNodes(3);
  mgr = new Redlock(nodes.urls, { retryDelayMs: 50 });
});
after(() => nodes.stop());

test('lock, extend and unlock', async () => {
  const lease = await mgr.acquire('orders:1', 5000, { waitMs: 0 });
  assert.ok(lease.validityMs > 4000 && lease.validityMs <= 5000, `validity ${lease.validityMs}`);
  assert.equal(lease.lost, false);
  assert.equal(lease.fencingToken, null);
  assert.equal(lease.resource, 'orders:1');
  assert.equal(await nodes.existsOn('redlock:orders:1'), 3);
  await assert.rejects(mgr.acquire('orders:1', 5000, { waitMs: 0 }), (e) => {
    assert.ok(e instanceof NotAcquiredError);
    assert.equal(e.nodes.length, 3);
    // Decided at a quorum of refusals: a third node's reply may not have been waited for.
    assert.ok(e.nodes.filter((n) => n.outcome === 'rejected').length >= 2, JSON.stringify(e.nodes));
    assert.ok(e.nodes.every((n) => n.outcome === 'rejected' || n.outcome === 'pending'));
    return true;
  });
  await lease.extend(20000);
  const pttl = await nodes.cmd(0, 'PTTL', 'redlock:orders:1');
  assert.ok(pttl > 15000, `PTTL ${pttl}`);
  assert.ok(lease.validityMs > 15000);
  await lease.release();
  assert.equal(await nodes.existsOn('redlock:orders:1'), 0);
  await assert.rejects(lease.extend(1000), NotHeldError);
});

test('fenced leases carry increasing fencing tokens (bigint)', async () => {
  const a = await mgr.acquire('acct:7', 5000, { fenced: true });
  await a.release();
  const b = await mgr.acquire('acct:7', 5000, { fenced: true });
  await b.release();
  assert.equal(typeof a.fencingToken, 'bigint');
  assert.ok(b.fencingToken > a.fencingToken);
});

test('a waiter gets the lock once the holder releases', async () => {
  const held = await mgr.acquire('wait:1', 30000);
  const t0 = Date.now();
  const waiter = mgr.acquire('wait:1', 5000, { waitMs: 10000 });
  setTimeout(() => held.release(), 200);
  const got = await waiter;
  const took = Date.now() - t0;
  assert.ok(took < 5000, `granted after ${took} ms`);
  await got.release();
});

test('await using releases at the end of the scope', { skip: !Symbol.asyncDispose }, async () => {
  {
    const lease = await mgr.acquire('scoped:1', 5000);
    await lease[Symbol.asyncDispose]();
    assert.equal(lease.released, true);
    await lease[Symbol.asyncDispose](); // idempotent
  }
  assert.equal(await nodes.existsOn('redlock:scoped:1'), 0);
});

test('a call that ends without waiting is settled before the event loop turns', async () => {
  // The engine refuses this TTL (above maxTtlMs) before it sends anything: the call ends
  // inside the JavaScript call, which settles its Promise there, so the rejection arrives
  // through microtasks alone (through the loop, it would need a turn that never comes here).
  let settled = null;
  const p = mgr.acquire('r', 120000).catch((e) => {
    settled = e;
  });
  for (let i = 0; i < 100 && settled === null; i++) await Promise.resolve();
  assert.ok(settled instanceof RangeError, `settled: ${settled}`);
  await p;
});

test('bad input is a TypeError or RangeError, before anything is sent', async () => {
  const before = mgr.metrics();
  await assert.rejects(mgr.acquire(42, 1000), TypeError);
  await assert.rejects(mgr.acquire('r', '1000'), TypeError);
  await assert.rejects(mgr.acquire('r', 1.5), RangeError);
  await assert.rejects(mgr.acquire('r', -1), RangeError);
  await assert.rejects(mgr.acquire('r', 1000, { wait: 5 }), TypeError);
  await assert.rejects(mgr.acquire('r', 1000, { fenced: 'yes' }), TypeError);
  await assert.rejects(mgr.acquire('r', 1000, { signal: {} }), TypeError);
  await assert.rejects(mgr.acquire('', 1000), InvalidArgumentError);
  await assert.rejects(mgr.acquire('r', 120000), RangeError); // above maxTtlMs
  await assert.rejects(mgr.acquire('r', 1000, { maxHoldMs: 5 }), RangeError);
  await assert.rejects(mgr.acquire('r', 1000, { owner: 'o', shared: true }), InvalidArgumentError);
  assert.throws(() => new Redlock('redis://127.0.0.1:1'), TypeError);
  assert.throws(() => new Redlock(['redis://127.0.0.1:1'], { retryCount: -1 }), RangeError);
  assert.throws(() => new Redlock(['not a url at all'], {}), InvalidArgumentError);
  assert.throws(() => mgr.semaphore('s', 0), RangeError);
  const attempts = (t) => (t.match(/^redlock_acquire_attempts_total\S* (\d+)/m) || [0, 0])[1];
  assert.equal(attempts(mgr.metrics()), attempts(before));
});
