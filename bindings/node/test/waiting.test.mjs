import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redlock, CancelledError, threadsStarted } from '../index.mjs';
import { startNodes, sleep } from './support/redis.mjs';

let nodes;
before(async () => {
  nodes = await startNodes(3);
});
after(() => nodes.stop());

test('an AbortSignal cancels a wait at once, leaving nothing held', async () => {
  const mgr = new Redlock(nodes.urls);
  const holder = await mgr.acquire('cancel:1', 30000);
  const ac = new AbortController();
  const waiter = mgr.acquire('cancel:1', 5000, { waitMs: 30000, signal: ac.signal });
  await sleep(300); // the waiter is asleep, waiting for the release
  const t0 = performance.now();
  ac.abort(new Error('stop'));
  let took;
  await assert.rejects(waiter, (e) => {
    took = performance.now() - t0;
    assert.ok(e instanceof CancelledError, String(e));
    assert.equal(e.cause.message, 'stop');
    return true;
  });
  console.log(`# cancel latency ${took.toFixed(1)} ms (the wait had 29.7 s left)`);
  // The issue asks for 50 ms (the printed latency); asserted with room for a loaded 2-core
  // machine, as the other bindings do. A wait that ignored the signal would run 30 s.
  assert.ok(took < 5000, `cancelled after ${took} ms`);
  await holder.release();
  assert.equal(await nodes.existsOn('redlock:cancel:1'), 0);
  // An already aborted signal sends nothing.
  await assert.rejects(mgr.acquire('cancel:1', 5000, { signal: AbortSignal.abort() }), CancelledError);
  // AbortSignal.timeout ends a wait as well.
  const h2 = await mgr.acquire('cancel:2', 30000);
  await assert.rejects(mgr.acquire('cancel:2', 5000, { waitMs: 30000, signal: AbortSignal.timeout(100) }),
    CancelledError);
  await h2.release();
  assert.equal(await nodes.existsOn('redlock:cancel:2'), 0);
});

test('64 waits do not stall the event loop, fs or timers', { timeout: 60000 }, async () => {
  const mgr = new Redlock(nodes.urls);
  const holder = await mgr.acquire('loop:1', 30000);
  const threads0 = threadsStarted();
  const waits = Array.from({ length: 64 }, () =>
    mgr.acquire('loop:1', 5000, { waitMs: 30000 }).then((l) => l.release()));
  const lags = [];
  let last = performance.now();
  const tick = setInterval(() => {
    const now = performance.now();
    lags.push(now - last - 10);
    last = now;
  }, 10);
  await sleep(300);
  const f0 = performance.now();
  const text = await fs.promises.readFile(fileURLToPath(import.meta.url), 'utf8');
  const readMs = performance.now() - f0;
  assert.ok(text.includes('64 waits'));
  await sleep(1200);
  clearInterval(tick);
  const started = threadsStarted() - threads0;
  await holder.release();
  await Promise.all(waits);
  lags.sort((a, b) => a - b);
  const p99 = lags[Math.floor(lags.length * 0.99)];
  const max = lags[lags.length - 1];
  console.log(`# ${lags.length} ticks: lag p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms; ` +
    `readFile ${readMs.toFixed(1)} ms; binding threads started ${started}`);
  // A loop blocked by the waits would show seconds (the printed lags are a few ms on an
  // idle machine; the bound leaves room for a loaded 2-core one); libuv's 4 threads taken by
  // them would hold readFile until the waits end.
  assert.ok(lags.length > 60, `${lags.length} ticks in 1.5 s`);
  assert.ok(p99 < 500, `p99 lag ${p99} ms`);
  assert.ok(readMs < 1000, `readFile took ${readMs} ms`);
  // The waits are suspended on the event loop: none took a thread.
  assert.equal(started, 0, `${started} threads started for the waits`);
  assert.equal(await nodes.existsOn('redlock:loop:1'), 0);
});
