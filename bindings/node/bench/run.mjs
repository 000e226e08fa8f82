// The Node binding's benchmark, in the shape of examples/bench: one lock+unlock cycle, N = 5
// redis-server nodes (started here), no delay and 1 ms one-way delay (proxies in a process
// of their own), one client uncontended and 8 clients on distinct resources. Drivers, in
// interleaved rounds on the same nodes and proxies:
//   C             the library's C ABI in a loop on threads (redlock_try_lock, redlock_unlock,
//                 redlock_lease_free: what a C program runs): the figure the binding is
//                 measured against;
//   redlock-quorum this binding: `await mgr.acquire(r, ttl, {waitMs: 0})`, `await lease.release()`,
//                 8 clients as 8 concurrent async loops in one process (calls on the event
//                 loop, as the binding runs them);
//   redlock-quorum (threads) the same, each call on one of the binding's threads instead
//                 (its first design, kept for the comparison);
//   node-redlock  redlock 5.0.0-beta.2 over ioredis, the same loops (bench/package.json;
//                 installed on first use; skipped if npm cannot install it).
//
//   node bench/run.mjs [--secs 2] [--rounds 3] [--delays 0,1] [--clients 1,8]
// Prints a Markdown table: p50, p99, cycles/s, and the ratios to the C figure (p50 for
// one client, throughput for 8) from the same run.
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redlock } from '../index.mjs';
import native from '../lib/native.js';
import { startNodes } from '../test/support/redis.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const SECS = Number(arg('secs', '2'));
const ROUNDS = Number(arg('rounds', '3'));
const DELAYS = arg('delays', '0,1').split(',').map(Number);
const CLIENTS = arg('clients', '1,8').split(',').map(Number);
const TTL = 10000;

function peer() {
  if (!fs.existsSync(path.join(here, 'node_modules', 'redlock'))) {
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', here], { stdio: 'inherit' });
    if (r.status !== 0) return null;
  }
  const require = createRequire(path.join(here, 'package.json'));
  try {
    return { Redlock: require('redlock').default, Redis: require('ioredis') };
  } catch (e) {
    console.error(`node-redlock not available: ${e.message}`);
    return null;
  }
}

function proxies(delay, ports) {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [path.join(here, 'proxy.mjs'), String(delay), ports.join(',')],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    c.stdout.once('data', (d) => resolve({ ports: JSON.parse(String(d)), child: c }));
  });
}

async function loops(clients, tag, cycle) {
  const lat = [];
  let failures = 0;
  const end = performance.now() + SECS * 1000;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async (_, i) => {
    const res = `${tag}:${i}`;
    while (performance.now() < end) {
      const t = performance.now();
      try {
        await cycle(res);
        lat.push((performance.now() - t) * 1000);
      } catch {
        failures++;
      }
    }
  }));
  return { lat, failures, wall: (performance.now() - t0) / 1000 };
}

const drivers = {
  async C(urls, clients, tag) {
    const r = await native.benchEngine(urls, SECS, clients, tag);
    return { summary: r };
  },
  async 'redlock-quorum'(urls, clients, tag, ctx) {
    ctx.ours ??= new Redlock(urls, { retryDelayMs: 1, nodeTimeoutMs: 200 });
    const mgr = ctx.ours;
    return loops(clients, tag, async (res) => {
      const lease = await mgr.acquire(res, TTL, { waitMs: 0 });
      await lease.release();
    });
  },
  async 'redlock-quorum (threads)'(urls, clients, tag, ctx) {
    ctx.ours ??= new Redlock(urls, { retryDelayMs: 1, nodeTimeoutMs: 200 });
    const mgr = ctx.ours;
    native.benchUseThreads(true);
    try {
      return await loops(clients, tag, async (res) => {
        const lease = await mgr.acquire(res, TTL, { waitMs: 0 });
        await lease.release();
      });
    } finally {
      native.benchUseThreads(false);
    }
  },
  async 'node-redlock'(urls, clients, tag, ctx) {
    if (!ctx.peer) return null;
    if (!ctx.peerMgr) {
      ctx.peerClients = urls.map((u) => new ctx.peer.Redis(u));
      ctx.peerMgr = new ctx.peer.Redlock(ctx.peerClients, { retryCount: 0, driftFactor: 0.01 });
    }
    const mgr = ctx.peerMgr;
    return loops(clients, tag, async (res) => {
      const lock = await mgr.acquire([res], TTL);
      await lock.release();
    });
  },
};

function pct(sorted, p) {
  return sorted.length ? sorted[Math.round((sorted.length - 1) * p)] : NaN;
}

const nodes = await startNodes(5);
const peerLib = peer();
const rows = [];
try {
  for (const delay of DELAYS) {
    const px = delay > 0 ? await proxies(delay, nodes.ports) : null;
    const urls = (px ? px.ports : nodes.ports).map((p) => `redis://127.0.0.1:${p}`);
    for (const clients of CLIENTS) {
      const acc = {};
      const ctx = { peer: peerLib };
      for (let round = 0; round < ROUNDS; round++) {
        for (const name of Object.keys(drivers)) {
          const r = await drivers[name](urls, clients, `bench:${delay}:${clients}:${name}`, ctx);
          if (!r) continue;
          const a = (acc[name] ??= { p50: [], p99: [], perSec: [], cycles: 0, failures: 0 });
          if (r.summary) {
            a.p50.push(r.summary.p50Us);
            a.p99.push(r.summary.p99Us);
            a.perSec.push(r.summary.perSec);
            a.cycles += r.summary.cycles;
            a.failures += r.summary.failures;
          } else {
            r.lat.sort((x, y) => x - y);
            a.p50.push(pct(r.lat, 0.5));
            a.p99.push(pct(r.lat, 0.99));
            a.perSec.push(r.lat.length / r.wall);
            a.cycles += r.lat.length;
            a.failures += r.failures;
          }
        }
      }
      if (ctx.peerClients) ctx.peerClients.forEach((c) => c.disconnect());
      const med = (v) => v.slice().sort((x, y) => x - y)[Math.floor(v.length / 2)];
      for (const [name, a] of Object.entries(acc)) {
        rows.push({ delay, clients, name, cycles: a.cycles, failures: a.failures,
          p50: med(a.p50), p99: med(a.p99), perSec: med(a.perSec) });
      }
    }
    if (px) px.child.kill('SIGKILL');
  }
} finally {
  await nodes.stop();
}

console.log(`\nNode binding benchmark: N = 5, ${SECS} s × ${ROUNDS} interleaved rounds per driver (medians), ` +
  `node ${process.version}, ${(await import('node:os')).cpus().length} CPUs`);
console.log('| delay | clients | driver | cycles | failures | p50 µs | p99 µs | cycles/s | vs C |');
console.log('|---|---:|---|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  const base = rows.find((x) => x.delay === r.delay && x.clients === r.clients && x.name === 'C');
  const ratio = r.clients === 1 ? `${(r.p50 / base.p50).toFixed(2)}× p50` : `${(base.perSec / r.perSec).toFixed(2)}× thr`;
  console.log(`| ${r.delay ? `${r.delay} ms` : 'none'} | ${r.clients} | ${r.name} | ${r.cycles} | ${r.failures} | ` +
    `${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} | ${r.perSec.toFixed(0)} | ${ratio} |`);
}
// The hand-over alone: a call that does nothing on the binding's threads, awaited one after
// the other (the thread that ran the last one is still watching for the next).
const hops = [];
for (let i = 0; i < 5000; i++) {
  const t = performance.now();
  await native.hop();
  hops.push((performance.now() - t) * 1000);
}
hops.sort((x, y) => x - y);
console.log(`\nhop (a call that does nothing, through the event loop, 5000 in a row): p50 ${pct(hops, 0.5).toFixed(1)} µs, ` +
  `p99 ${pct(hops, 0.99).toFixed(1)} µs`);
const json = path.join(here, 'last.json');
fs.writeFileSync(json, JSON.stringify(rows, null, 1));
