import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startNodes, sleep } from './support/redis.mjs';

const exiter = fileURLToPath(new URL('./support/exiter.mjs', import.meta.url));
let nodes;
before(async () => {
  nodes = await startNodes(3);
});
after(() => nodes.stop());

function run(mode) {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [exiter, JSON.stringify(nodes.urls), mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => c.kill('SIGKILL'), 20000);
    c.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out, err });
    });
  });
}

for (const mode of ['exit', 'drain']) {
  test(`a process that ends (${mode}) with leases held exits cleanly; the keys expire by TTL`, async () => {
    const t0 = performance.now();
    const r = await run(mode);
    const took = performance.now() - t0;
    assert.equal(r.signal, null, r.err);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /held/);
    assert.equal(r.err, '');
    assert.ok(took < 10000, `took ${took} ms to exit`);
    const keys = [`redlock:exit:${mode}:plain`, `redlock:exit:${mode}:renewing`];
    for (const k of keys) assert.ok((await nodes.existsOn(k)) >= 2, `${k} held after the exit`);
    // TTLs of 5 s (support/exiter.mjs): long enough to outlast a slow exit on a busy machine.
    for (let i = 0; i < 300; i++) {
      let n = 0;
      for (const k of keys) n += await nodes.existsOn(k);
      if (n === 0) return;
      await sleep(50);
    }
    assert.fail('the keys outlived their TTL by 10 s');
  });
}

test('a worker thread terminated during a wait: no crash, and the wait leaves nothing', async () => {
  const { Worker } = await import('node:worker_threads');
  const { Redlock } = await import('../index.mjs');
  const waiter = fileURLToPath(new URL('./support/waiter.mjs', import.meta.url));
  const mgr = new Redlock(nodes.urls);
  const holder = await mgr.acquire('exit:worker', 10000, { fenced: true });
  for (let i = 0; i < 4; i++) {
    const w = new Worker(waiter, { workerData: { urls: nodes.urls, resource: 'exit:worker' } });
    await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await w.terminate();
  }
  // The waits go on, on the binding's threads, and are granted one after another once the
  // holder releases (each fenced grant raises the fencing counter: the holder's was 1, so 5
  // once all four were granted); each grant reaches no one (its worker is gone) and is
  // released at once, not left to its 5 s TTL. This process goes on. A grant's token is
  // written to the nodes that granted it: a node that still held the previous grant's key
  // (its release not there yet) keeps the older count, so the count is the largest of the
  // nodes' counters.
  await holder.release();
  const counter = async () => {
    let max = 0;
    for (let i = 0; i < 3; i++) {
      max = Math.max(max, Number(await nodes.cmd(i, 'GET', 'redlock-fence:exit:worker')));
    }
    return max;
  };
  let granted = 0;
  for (let i = 0; i < 200 && granted < 5; i++) {
    await sleep(50);
    granted = await counter();
  }
  assert.equal(granted, 5, 'the four terminated workers\' waits were each granted');
  let free = false;
  for (let i = 0; i < 60 && !free; i++) {
    await sleep(50);
    free = (await nodes.existsOn('redlock:exit:worker')) === 0;
  }
  assert.ok(free, 'a grant to a terminated worker was left held');
  const again = await mgr.acquire('exit:worker', 1000, { waitMs: 3000 });
  await again.release();
});

test('a call still waiting keeps the process alive: nothing else is left to run', async () => {
  // The child's only pending work is an acquisition waiting for a lock held here; the
  // binding's watch on its sockets never keeps a loop alive by itself, so this checks that
  // the pending call does. An event loop left empty would end the child at once, with
  // "unsettled top-level await" (exit code 13).
  const { Redlock } = await import('../index.mjs');
  const mgr = new Redlock(nodes.urls);
  const holder = await mgr.acquire('exit:pending', 30000);
  const index = new URL('../index.mjs', import.meta.url).href;
  const src = `import { Redlock } from ${JSON.stringify(index)};
const mgr = new Redlock(${JSON.stringify(nodes.urls)});
console.log('waiting');
const l = await mgr.acquire('exit:pending', 5000, { waitMs: 60000 });
console.log('granted');
await l.release();`;
  const c = spawn(process.execPath, ['--input-type=module', '-e', src], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  c.stdout.on('data', (d) => (out += d));
  c.stderr.on('data', (d) => (err += d));
  const exited = new Promise((resolve) => c.once('exit', (code, signal) => resolve({ code, signal })));
  for (let i = 0; i < 600 && !out.includes('waiting'); i++) await sleep(50);
  assert.match(out, /waiting/, err);
  // Long enough for an empty loop to have ended the child; the lock is then released.
  await sleep(1000);
  await holder.release();
  const killer = setTimeout(() => c.kill('SIGKILL'), 60000);
  const r = await exited;
  clearTimeout(killer);
  assert.equal(r.signal, null, err);
  assert.equal(r.code, 0, err);
  assert.match(out, /granted/);
});
