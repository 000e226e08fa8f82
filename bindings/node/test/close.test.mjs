import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redlock, ClosedError, NotAcquiredError } from '../index.mjs';
import { startNodes } from './support/redis.mjs';

let nodes;
before(async () => {
  nodes = await startNodes(3);
});
after(() => nodes.stop());

const isClosed = (e) => {
  assert.ok(e instanceof ClosedError, `${e && e.name}: ${e && e.message}`);
  assert.equal(e.kind, 'closed');
  return true;
};

test('close ends the waits in progress with a ClosedError, refuses later calls and leaves leases usable', async () => {
  const mgr = new Redlock(nodes.urls, { retryDelayMs: 50 });
  const held = await mgr.acquire('close:a', 30000, { waitMs: 0 });
  const sem = mgr.semaphore('close:s', 1);
  const election = mgr.election('close:e');
  // Both would wait 30 s: only close() can end them sooner, and with a ClosedError.
  const waiting = mgr.acquire('close:a', 10000, { waitMs: 30000 });
  const watching = election.waitChange(0n, 30000);
  const waits = Promise.allSettled([waiting, watching]);
  const closing = mgr.close();
  assert.equal(mgr.closed, true);
  for (const r of await waits) {
    assert.equal(r.status, 'rejected');
    isClosed(r.reason);
  }
  await closing;

  await assert.rejects(mgr.acquire('close:b', 1000, { waitMs: 0 }), isClosed);
  await assert.rejects(mgr.acquireMany(['close:b', 'close:c'], 1000), isClosed);
  await assert.rejects(mgr.holders('close:a'), isClosed);
  await assert.rejects(mgr.using('close:b', 1000, async () => 1), isClosed);
  await assert.rejects(sem.acquire(1000, { waitMs: 0 }), isClosed);
  await assert.rejects(election.leader(), isClosed);
  await assert.rejects(election.campaign('me', 1000, { waitMs: 0 }), isClosed);
  await assert.rejects(election.observe().next(), isClosed);
  assert.throws(() => mgr.semaphore('close:s2', 1), isClosed);
  assert.throws(() => mgr.election('close:e2'), isClosed);
  assert.throws(() => mgr.metrics(), isClosed);
  assert.throws(() => mgr.nodeStates(), isClosed);
  assert.equal(mgr.nodeCount, 3);
  assert.equal(mgr.quorum, 2);

  // Nothing was released by close(), and the lease still extends and releases.
  assert.equal(await nodes.existsOn('redlock:close:a'), 3);
  await held.extend(20000);
  assert.ok((await nodes.cmd(0, 'PTTL', 'redlock:close:a')) > 15000);
  await held.release();
  assert.equal(await nodes.existsOn('redlock:close:a'), 0);

  await mgr.close(); // idempotent
  await mgr[Symbol.asyncDispose]();
});

test('close resolves once the calls in progress have settled, which it does not cut short', async () => {
  const mgr = new Redlock(nodes.urls, { retryCount: 3, retryDelayMs: 100 });
  const held = await mgr.acquire('close:r', 30000, { waitMs: 0 });
  // The default acquisition retries (a bounded number of times): close() lets it finish.
  let settled = false;
  const outcome = mgr.acquire('close:r', 10000).then(() => null, (e) => e).finally(() => {
    settled = true;
  });
  await mgr.close();
  assert.equal(settled, true, 'close() resolved before the call in progress settled');
  assert.ok((await outcome) instanceof NotAcquiredError);
  await held.release();
});

test('a closed manager drops its connections once nothing it made is left', async () => {
  // The ids of the clients connected to node 1, but for the inspector's own (one per command).
  const clients = async () => {
    const list = String(await nodes.cmd(1, 'CLIENT', 'LIST'));
    return new Set(list.split('\n').filter((l) => l.includes('addr=') && !l.includes('cmd=client'))
      .map((l) => /(?:^|\s)id=(\d+)/.exec(l)[1]));
  };
  const before = await clients();
  const mgr = new Redlock(nodes.urls);
  const h = await mgr.holders('close:nobody');
  assert.equal(h.locked, false);
  const ours = [...await clients()].filter((id) => !before.has(id));
  assert.ok(ours.length > 0, 'the manager connected');
  await mgr.close();
  // The sockets close when the engine's manager is dropped: wait for the server to see it
  // (bounded), and fail if it never does.
  const end = Date.now() + 10000;
  let open = ours;
  while (open.length > 0 && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50));
    const now = await clients();
    open = ours.filter((id) => now.has(id));
  }
  assert.deepEqual(open, [], 'connections left open after close()');
});
