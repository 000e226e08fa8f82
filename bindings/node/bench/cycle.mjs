// One client's lock+unlock cycle through this binding, for examples/bench's `--bindings`
// table (the shape of bindings/python/bench_cycle.py and bindings/go/cmd/bench-cycle): prints
// one JSON line {"cycles", "p50_us", "p99_us"}.
//   node bench/cycle.mjs --nodes redis://127.0.0.1:7001,... [--secs 3]
import { Redlock } from '../index.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const nodes = arg('nodes', '').split(',').filter(Boolean);
const secs = Number(arg('secs', '3'));
const mgr = new Redlock(nodes, { retryDelayMs: 1, nodeTimeoutMs: 200 });
const lat = [];
const end = performance.now() + secs * 1000;
while (performance.now() < end) {
  const t = performance.now();
  const lease = await mgr.acquire('bench:node-cycle', 10000, { waitMs: 0 });
  await lease.release();
  lat.push((performance.now() - t) * 1000);
}
lat.sort((a, b) => a - b);
const pct = (p) => lat[Math.round((lat.length - 1) * p)];
console.log(JSON.stringify({ cycles: lat.length, p50_us: +pct(0.5).toFixed(1), p99_us: +pct(0.99).toFixed(1) }));
