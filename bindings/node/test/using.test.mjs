import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redlock, LeaseLostError } from '../index.mjs';
import { startNodes, sleep } from './support/redis.mjs';

let nodes;
before(async () => {
  nodes = await startNodes(3);
});
after(() => nodes.stop());

test('using renews while the routine runs and always releases', async () => {
  const mgr = new Redlock(nodes.urls);
  const out = await mgr.using('job:1', 1000, { waitMs: 1000 }, async (signal, lease) => {
    assert.equal(lease.renewing, true);
    await sleep(2500); // more than twice the TTL: renewals of 1 s leases hold under load
    assert.equal(signal.aborted, false);
    assert.ok(lease.validityMs > 0);
    return 'done';
  });
  assert.equal(out, 'done');
  assert.equal(await nodes.existsOn('redlock:job:1'), 0);
  // The routine's error is the one thrown, and the lock is released all the same.
  await assert.rejects(mgr.using('job:1', 1000, async () => {
    throw new Error('boom');
  }), /boom/);
  assert.equal(await nodes.existsOn('redlock:job:1'), 0);
});

test('using: a lease lost mid-routine aborts the signal before its validity ends', async () => {
  const mgr = new Redlock(nodes.urls, { nodeTimeoutMs: 500 });
  const ttl = 5000;
  let abortedAt = null;
  let validUntil = null;
  let reason = null;
  await mgr.using('job:lost', ttl, async (signal, lease) => {
    signal.addEventListener('abort', () => {
      abortedAt = performance.now();
      reason = signal.reason;
    });
    // Kill a majority of the nodes: no renewal can be confirmed from now on.
    await nodes.kill(1);
    await nodes.kill(2);
    validUntil = performance.now() + lease.validityMs;
    for (let i = 0; i < 200 && !signal.aborted; i++) await sleep(25);
    assert.ok(lease.lost);
  });
  assert.ok(abortedAt !== null, 'the signal was never aborted');
  assert.ok(reason instanceof LeaseLostError, String(reason));
  console.log(`# aborted ${(validUntil - abortedAt).toFixed(0)} ms before the validity ended`);
  assert.ok(abortedAt < validUntil, `aborted ${(abortedAt - validUntil).toFixed(0)} ms after validity`);
});
