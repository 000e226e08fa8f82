// The rest of the family, one test each: reentrant (owner), shared, fair, acquireMany,
// semaphores, holders, TLS options, metrics and node states.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  Redlock, NotAcquiredError, UnavailableError, InvalidArgumentError,
} from '../index.mjs';
import { startNodes, sleep } from './support/redis.mjs';

let nodes;
let mgr;
before(async () => {
  nodes = await startNodes(3);
  mgr = new Redlock(nodes.urls, { label: 'node-test' });
});
after(() => nodes.stop());

const refused = (p) => assert.rejects(p, NotAcquiredError);

test('owner: reentrant, held until the last lease of the owner is released', async () => {
  const a = await mgr.acquire('re:1', 10000, { owner: 'job-1', waitMs: 0 });
  const b = await mgr.acquire('re:1', 10000, { owner: Buffer.from('job-1'), waitMs: 0 });
  await refused(mgr.acquire('re:1', 10000, { owner: 'job-2', waitMs: 0 }));
  await refused(mgr.acquire('re:1', 10000, { waitMs: 0 }));
  await a.release();
  await refused(mgr.acquire('re:1', 10000, { owner: 'job-2', waitMs: 0 }));
  await b.release();
  const c = await mgr.acquire('re:1', 10000, { owner: 'job-2', waitMs: 0 });
  await c.release();
  await assert.rejects(mgr.acquire('re:1', 1000, { owner: '' }), InvalidArgumentError);
});

test('shared: readers together, a writer excluded until the last reader leaves', async () => {
  const readers = await Promise.all(
    Array.from({ length: 4 }, () => mgr.acquire('sh:1', 10000, { shared: true, waitMs: 0 })));
  assert.ok(readers.every((r) => r.shared));
  await refused(mgr.acquire('sh:1', 10000, { waitMs: 0 }));
  const writer = mgr.acquire('sh:1', 10000, { waitMs: 10000 });
  await sleep(100);
  for (const r of readers) await r.release();
  const w = await writer;
  assert.equal(w.shared, false);
  await refused(mgr.acquire('sh:1', 10000, { shared: true, waitMs: 0 }));
  await w.release();
});

test('fair: waiters are granted in the order they queued', async () => {
  const holder = await mgr.acquire('fair:1', 30000, { fair: true });
  assert.equal(holder.fair, true);
  assert.equal(holder.ticket, null);
  const order = [];
  const waiters = [];
  for (let i = 0; i < 3; i++) {
    const m = new Redlock(nodes.urls); // a manager each: the engine's queue decides, not the process
    waiters.push(m.acquire('fair:1', 10000, { fair: true, waitMs: 60000, dropOutMs: 10000 })
      .then(async (l) => {
        order.push(i);
        assert.equal(typeof l.ticket, 'bigint');
        await sleep(20);
        await l.release();
      }));
    // The next waiter queues once this one is in the queue on every node (bounded generously:
    // a busy machine may take seconds; starting the next one earlier could reorder them).
    let queued = false;
    for (const end = Date.now() + 30000; !queued && Date.now() < end;) {
      const lens = await Promise.all([0, 1, 2].map((n) => nodes.cmd(n, 'HLEN', 'redlock-fair:redlock:fair:1')));
      queued = lens.every((x) => x >= i + 1);
      if (!queued) await sleep(10);
    }
    assert.ok(queued, `waiter ${i} never queued on every node`);
  }
  await holder.release();
  await Promise.all(waiters);
  assert.deepEqual(order, [0, 1, 2]);
  await assert.rejects(mgr.acquire('fair:1', 1000, { fair: true, owner: 'o' }), InvalidArgumentError);
});

test('acquireMany: all of the set or none', async () => {
  const set = await mgr.acquireMany(['m:a', 'm:b', 'm:c'], 10000, { waitMs: 0 });
  assert.deepEqual(set.resource, ['m:a', 'm:b', 'm:c']);
  await refused(mgr.acquire('m:b', 10000, { waitMs: 0 }));
  await refused(mgr.acquireMany(['m:c', 'm:d'], 10000, { waitMs: 0 }));
  assert.equal(await nodes.existsOn('redlock:m:d'), 0); // nothing of a refused set stays
  await set.extend(20000);
  await set.release();
  for (const r of ['a', 'b', 'c']) assert.equal(await nodes.existsOn(`redlock:m:${r}`), 0);
  const viaAcquire = await mgr.acquire(['m:e', 'm:f'], 10000); // node-redlock's form
  assert.deepEqual(viaAcquire.resources, ['m:e', 'm:f']);
  await viaAcquire.release();
  await assert.rejects(mgr.acquireMany(['x', 'x'], 1000), InvalidArgumentError);
  await assert.rejects(mgr.acquireMany('x', 1000), TypeError);
  await assert.rejects(mgr.acquireMany(['x'], 1000, { fenced: true }), TypeError);
});

test('semaphore: at most `permits` holders, each on a slot of its own', async () => {
  const sem = mgr.semaphore('exports', 2);
  assert.equal(sem.permits, 2);
  const a = await sem.acquire(10000);
  const b = await sem.acquire(10000, { fenced: true });
  assert.notEqual(a.permit.slot, b.permit.slot);
  assert.equal(a.permit.permits, 2);
  assert.equal(typeof b.fencingToken, 'bigint');
  await refused(sem.acquire(10000, { waitMs: 0 }));
  const c = sem.acquire(10000, { waitMs: 10000 });
  await sleep(50);
  await a.release();
  const got = await c;
  assert.equal(got.permit.slot, a.permit.slot);
  await b.release();
  await got.release();
  await assert.rejects(mgr.semaphore('exports', 3).acquire(1000, { waitMs: 0 }).then(
    (l) => l.release()).then(() => mgr.semaphore('exports', 2).acquire(1000, { owner: 'x' })), TypeError);
  assert.throws(() => mgr.semaphore('s', 1001), InvalidArgumentError);
});

test('holders: who holds a resource, per node and on a quorum', async () => {
  const free = await mgr.holders('h:1');
  assert.equal(free.locked, false);
  assert.ok(free.nodes.every((n) => n.state === 'free'));
  const lease = await mgr.acquire('h:1', 10000);
  const h = await mgr.holders('h:1');
  assert.equal(h.locked, true);
  assert.equal(h.heldOn, 3);
  assert.equal(h.holder.kind, 'lock');
  assert.equal(h.holder.label, 'node-test');
  assert.equal(h.holder.id.toString(), lease.value);
  assert.ok(lease.value.startsWith(lease.token));
  assert.ok(h.holder.ttlMs > 9000 && h.holder.ttlMs <= 10000);
  await lease.release();
});

test('TLS options: a rediss:// node that does not speak TLS, and a missing CA file', async () => {
  const m = new Redlock(nodes.urls.map((u) => u.replace('redis://', 'rediss://')), {
    connectTimeoutMs: 500, restartQuarantine: false,
  });
  await assert.rejects(m.acquire('tls:1', 1000, { waitMs: 0 }), (e) => {
    assert.ok(e instanceof UnavailableError, String(e));
    assert.ok(e.nodes.filter((n) => n.outcome === 'tls').length >= 2, JSON.stringify(e.nodes));
    return true;
  });
  assert.throws(() => new Redlock(['rediss://127.0.0.1:1'], { tlsCaFile: '/nonexistent/ca.pem' }),
    (e) => e instanceof InvalidArgumentError && /nonexistent/.test(e.message));
  assert.throws(() => new Redlock(nodes.urls, { tlsClientCert: '/a.pem' }), TypeError);
});

test('metrics and node states', async () => {
  await (await mgr.acquire('met:1', 1000)).release();
  const text = mgr.metrics();
  assert.match(text, /^# HELP redlock_/m);
  assert.match(text, /redlock_acquire/);
  const states = mgr.nodeStates();
  assert.equal(states.length, 3);
  assert.deepEqual(states.map((s) => s.index), [0, 1, 2]);
  assert.ok(states.every((s) => s.quarantined === false && typeof s.addr === 'string'));
  assert.equal(mgr.nodeCount, 3);
  assert.equal(mgr.quorum, 2);
});
