import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startNodes } from './support/redis.mjs';

const contender = fileURLToPath(new URL('./support/contender.mjs', import.meta.url));
let nodes;
let witness;
before(async () => {
  nodes = await startNodes(3);
  witness = await startNodes(1);
});
after(async () => {
  await nodes.stop();
  await witness.stop();
});

function inThread(args) {
  return new Promise((resolve, reject) => {
    const w = new Worker(contender, { workerData: args });
    w.once('message', resolve);
    w.once('error', reject);
    w.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)));
  });
}

function inProcess(args) {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [contender, JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}`))));
  });
}

test('mutual exclusion between 8 worker threads and 4 processes', { timeout: 120000 }, async () => {
  const args = { urls: nodes.urls, witness: witness.ports[0], resource: 'mx', rounds: 8 };
  const results = await Promise.all([
    ...Array.from({ length: 8 }, () => inThread(args)),
    ...Array.from({ length: 4 }, () => inProcess(args)),
  ]);
  const overlaps = results.reduce((a, r) => a + r.overlaps, 0);
  const sections = results.reduce((a, r) => a + r.sections, 0);
  assert.equal(overlaps, 0);
  assert.equal(sections, 12 * 8);
  assert.equal(await witness.cmd(0, 'GET', 'sections').then(String), String(12 * 8));
  assert.equal(await nodes.existsOn('redlock:mx'), 0);
});
