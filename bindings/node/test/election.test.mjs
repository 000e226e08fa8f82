import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  Redlock, Election, Leadership, NotAcquiredError, NotHeldError, CancelledError, LeaseLostError,
  InvalidArgumentError, MAX_LEADER_VALUE,
} from '../index.mjs';
import { startNodes, sleep } from './support/redis.mjs';

let nodes;
let mgr;
before(async () => {
  nodes = await startNodes(3);
  mgr = new Redlock(nodes.urls, { retryDelayMs: 50 });
});
after(() => nodes.stop());

test('campaign, leader, proclaim, resign: terms rise from one leader to the next', async () => {
  const e = mgr.election('sched:1');
  assert.ok(e instanceof Election);
  assert.equal(e.name, 'sched:1');
  assert.equal(await e.leader(), null);

  const a = await e.campaign('10.0.0.7:80', 5000);
  assert.ok(a instanceof Leadership);
  assert.equal(typeof a.term, 'bigint');
  assert.ok(a.term > 0n);
  assert.deepEqual(a.value, Buffer.from('10.0.0.7:80'));
  assert.equal(a.election, 'sched:1');
  assert.equal(a.lost, false);
  assert.equal(a.lostReason, null);
  assert.equal(a.lostSignal.aborted, false);
  assert.ok(a.validityMs > 3000 && a.validityMs <= 5000, `validity ${a.validityMs}`);
  assert.equal(a.lease.fencingToken, a.term);
  assert.equal(a.lease.renewing, true);

  let l = await e.leader();
  assert.equal(l.term, a.term);
  assert.equal(l.value.toString(), '10.0.0.7:80');
  assert.ok(l.validityMs > 0 && l.validityMs <= 5000, `leader validity ${l.validityMs}`);

  // One leader at a time: a second candidate trying once is refused.
  await assert.rejects(e.campaign('10.0.0.8:80', 5000, { waitMs: 0 }), NotAcquiredError);

  await a.proclaim('10.0.0.7:81');
  assert.equal(a.value.toString(), '10.0.0.7:81');
  l = await e.leader();
  assert.equal(l.term, a.term, 'a proclamation keeps the term');
  assert.equal(l.value.toString(), '10.0.0.7:81');

  await a.resign();
  assert.equal(a.resigned, true);
  assert.equal(a.lost, true);
  assert.equal(a.lostSignal.aborted, true);
  assert.ok(a.lostSignal.reason instanceof LeaseLostError);
  assert.equal(a.lostSignal.reason.kind, 'resigned');
  assert.equal(await e.leader(), null);
  await assert.rejects(a.proclaim('x'), NotHeldError);

  const b = await e.campaign(Buffer.from([1, 2, 3]), 5000, { waitMs: 0 });
  assert.ok(b.term > a.term, `${b.term} > ${a.term}`);
  assert.deepEqual((await e.leader()).value, Buffer.from([1, 2, 3]));
  // An election and a lock of the same name are independent.
  const lock = await mgr.acquire('sched:1', 5000, { waitMs: 0 });
  await lock.release();
  await b[Symbol.asyncDispose]();
  assert.equal(b.resigned, true);
  await b[Symbol.asyncDispose](); // idempotent

  const c = await e.lead('c', 5000, { waitMs: 0 }, async (signal, leadership) => {
    assert.equal(signal, leadership.lostSignal);
    assert.equal(signal.aborted, false);
    assert.ok(leadership.term > b.term);
    return leadership.term;
  });
  assert.ok(c > b.term);
  assert.equal(await e.leader(), null, 'lead resigns at the end');
  await assert.rejects(e.lead('d', 5000, async () => {
    throw new Error('routine failed');
  }), /routine failed/);
  assert.equal(await e.leader(), null, 'lead resigns when the routine throws');
});

test('a waiting candidate is woken by the resignation and leads in a higher term', async () => {
  const e = mgr.election('sched:2');
  const a = await e.campaign('a', 30000);
  let bLeads = false;
  const t0 = Date.now();
  const waiting = e.campaign('b', 5000).then((l) => {
    bLeads = true;
    return l;
  });
  await sleep(300);
  assert.equal(bLeads, false, 'b waits while a leads');
  assert.equal((await e.leader()).value.toString(), 'a');
  await a.resign();
  const b = await waiting;
  const took = Date.now() - t0;
  assert.ok(b.term > a.term, `${b.term} > ${a.term}`);
  assert.equal((await e.leader()).value.toString(), 'b');
  // Woken by the resignation, not by a's 30 s TTL running out (bound generous for a busy
  // machine).
  assert.ok(took < 15000, `b led after ${took} ms`);
  // waitMs > 0 gives up with NotAcquiredError while b leads.
  await assert.rejects(e.campaign('c', 5000, { waitMs: 200 }), NotAcquiredError);
  await b.resign();
});

test('observe yields every new leader in increasing term order, never twice', async () => {
  const e = mgr.election('sched:3');
  const ac = new AbortController();
  const seen = [];
  const watcher = (async () => {
    for await (const l of mgr.election('sched:3').observe({ signal: ac.signal })) {
      seen.push({ term: l.term, value: l.value.toString() });
      if (l.value.toString() === 'v3') break;
    }
  })();
  const terms = [];
  for (const v of ['v0', 'v1', 'v2', 'v3']) {
    const l = await e.campaign(v, 5000, { waitMs: 5000 });
    terms.push(l.term);
    if (v === 'v1') await l.proclaim('v1b'); // same term: not yielded again
    // The observer may skip intermediate terms, never the latest: wait (bounded) until it
    // has seen this one, so that every term is observed, then hold a little longer.
    for (let i = 0; i < 1000 && !seen.some((x) => x.term === l.term); i++) await sleep(10);
    await sleep(100);
    await l.resign();
  }
  await watcher;
  ac.abort();
  console.log(`# observed ${seen.length} of ${terms.length} terms: ${seen.map((x) => x.term).join(', ')}`);
  for (let i = 1; i < terms.length; i++) assert.ok(terms[i] > terms[i - 1]);
  // Every term once, in increasing order (no duplicates: not the proclamation, not a term
  // seen again by a later wait).
  assert.deepEqual(seen.map((x) => x.term), terms);
  assert.equal(seen[0].value, 'v0');
  assert.ok(['v1', 'v1b'].includes(seen[1].value), seen[1].value);
  assert.equal(seen[3].value, 'v3');

  // An aborted signal ends an observer that is waiting (no leader now), promptly.
  const ac2 = new AbortController();
  const it = e.observe({ signal: ac2.signal });
  const next = it.next();
  await sleep(200);
  const t0 = performance.now();
  ac2.abort();
  const r = await next;
  const took = performance.now() - t0;
  assert.equal(r.done, true);
  assert.ok(took < 5000, `observer ended ${took} ms after abort`);
  // A pre-aborted signal yields nothing.
  const none = [];
  for await (const l of e.observe({ signal: AbortSignal.abort() })) none.push(l);
  assert.deepEqual(none, []);

  // waitChange: one bounded wait.
  const lead = await e.campaign('w', 5000);
  const w = await e.waitChange(0n, 1000);
  assert.equal(w.term, lead.term);
  assert.equal(await e.waitChange(lead.term, 100), null);
  assert.equal((await e.waitChange(Number(lead.term) - 1, 100)).term, lead.term);
  await lead.resign();
});

test('an aborted campaign wait returns promptly, holding nothing', async () => {
  const e = mgr.election('sched:4');
  const a = await e.campaign('a', 30000);
  const ac = new AbortController();
  const waiter = e.campaign('b', 5000, { signal: ac.signal });
  await sleep(300);
  const t0 = performance.now();
  ac.abort(new Error('stop'));
  let took;
  await assert.rejects(waiter, (err) => {
    took = performance.now() - t0;
    assert.ok(err instanceof CancelledError, String(err));
    assert.equal(err.cause.message, 'stop');
    return true;
  });
  console.log(`# campaign cancel latency ${took.toFixed(1)} ms`);
  assert.ok(took < 5000, `cancelled after ${took} ms`);
  assert.equal((await e.leader()).term, a.term, 'the leader is unchanged');
  await a.resign();
  assert.equal(await e.leader(), null, 'the cancelled candidate holds nothing');
  // A pre-aborted signal sends nothing; AbortSignal.timeout ends a wait.
  await assert.rejects(e.campaign('b', 5000, { signal: AbortSignal.abort() }), CancelledError);
  assert.equal(await e.leader(), null);
  const h = await e.campaign('h', 30000);
  await assert.rejects(e.campaign('b', 5000, { signal: AbortSignal.timeout(100) }), CancelledError);
  await assert.rejects(e.waitChange(h.term, 30000, { signal: AbortSignal.timeout(100) }), CancelledError);
  assert.equal((await e.leader()).value.toString(), 'h');
  await h.resign();
});

test('a lost leadership aborts lostSignal and calls onLost', { timeout: 60000 }, async () => {
  const own = await startNodes(3);
  try {
    const m = new Redlock(own.urls, { retryDelayMs: 50 });
    const e = m.election('sched:lost');
    let calledWith = null;
    const l = await e.campaign('x', 1500, { onLost: (ld) => { calledWith = ld; } });
    assert.equal(await l.waitLost(50), false);
    await own.kill(0);
    await own.kill(1);
    const lost = await l.waitLost(20000);
    assert.equal(lost, true);
    assert.equal(l.lost, true);
    assert.equal(l.lostSignal.aborted, true);
    assert.ok(l.lostSignal.reason instanceof LeaseLostError);
    assert.equal(l.lostSignal.reason.kind, 'lost');
    for (let i = 0; i < 100 && calledWith === null; i++) await sleep(20);
    assert.equal(calledWith, l);
    await l[Symbol.asyncDispose](); // a lost leadership's failed resignation is not thrown
  } finally {
    await own.stop();
  }
});

test('bad input is a TypeError or RangeError, before anything is sent', async () => {
  const before = mgr.metrics();
  assert.throws(() => mgr.election(42), TypeError);
  assert.throws(() => mgr.election(''), InvalidArgumentError);
  assert.throws(() => mgr.election('x'.repeat(2000)), InvalidArgumentError);
  const e = mgr.election('sched:bad');
  await assert.rejects(e.campaign(7, 1000), TypeError);
  await assert.rejects(e.campaign('v', '1000'), TypeError);
  await assert.rejects(e.campaign('v', -1), RangeError);
  await assert.rejects(e.campaign('v', 1.5), RangeError);
  await assert.rejects(e.campaign('v', 120000), InvalidArgumentError); // above maxTtlMs
  await assert.rejects(e.campaign('x'.repeat(MAX_LEADER_VALUE + 1), 1000), InvalidArgumentError);
  for (const k of ['owner', 'shared', 'fair', 'dropOutMs', 'fenced']) {
    await assert.rejects(e.campaign('v', 1000, { [k]: true }), TypeError, k);
  }
  await assert.rejects(e.campaign('v', 1000, { waitMs: -5 }), RangeError);
  await assert.rejects(e.campaign('v', 1000, { signal: {} }), TypeError);
  await assert.rejects(e.campaign('v', 1000, { onLost: 'no' }), TypeError);
  await assert.rejects(e.campaign('v', 1000, { maxHoldMs: 5000 }), InvalidArgumentError);
  await assert.rejects(e.lead('v', 1000, {}), TypeError);
  await assert.rejects(e.waitChange('1'), TypeError);
  await assert.rejects(e.waitChange(-1n), RangeError);
  await assert.rejects(e.waitChange(1n << 64n), RangeError);
  await assert.rejects(e.waitChange(0n, -1), RangeError);
  await assert.rejects(e.waitChange(0n, 10, { timeout: 5 }), TypeError);
  assert.throws(() => e.observe({ signal: 'x' }), TypeError);
  assert.throws(() => e.observe(5), TypeError);
  const attempts = (t) => (t.match(/^redlock_acquire_attempts_total\S* (\d+)/m) || [0, 0])[1];
  assert.equal(attempts(mgr.metrics()), attempts(before));
  assert.equal(await e.leader(), null);
});
