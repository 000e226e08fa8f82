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
    for (let i = 0; i < 100; i++) {
      let n = 0;
      for (const k of keys) n += await nodes.existsOn(k);
      if (n === 0) return;
      await sleep(50);
    }
    assert.fail('the keys outlived their TTL by 5 s');
  });
}
