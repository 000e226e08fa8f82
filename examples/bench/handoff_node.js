// One node-redlock client for the hot-resource rows of examples/bench (handoff.rs): locks one
// resource over and over with node-redlock's retry loop (its defaults: 200 ms delay, 200 ms
// jitter), holds it, unlocks, and prints the CLOCK_MONOTONIC instants (ns) of its grants and
// of its releases' returns as one JSON line.
//
//   node handoff_node.js NODES RESOURCE START_NS END_NS HOLD_MS TTL_MS THINK_MS
//
// Needs `redlock` (4.x) and `ioredis` where Node finds them (NODE_PATH); the benchmark skips
// this driver when they are missing.
const Redis = require('ioredis');
const Redlock = require('redlock');

const [nodes, resource, startNs, endNs, holdMs, ttlMs, thinkMs] = process.argv.slice(2);
const think = Number(thinkMs || 0);
const start = BigInt(startNs);
const end = BigInt(endNs);
const hold = Number(holdMs);
const ttl = Number(ttlMs);
const clients = nodes.split(',').map((url) => new Redis(url));
// Enough retries to last the whole run, as the other drivers wait until its end.
const remainingMs = Number((end - process.hrtime.bigint()) / 1000000n);
const redlock = new Redlock(clients, {
  retryCount: Math.ceil(remainingMs / 200) + 10,
  retryDelay: 200,
  retryJitter: 200,
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const grants = [];
  const releases = [];
  while (process.hrtime.bigint() < start) await sleep(1);
  while (process.hrtime.bigint() < end) {
    let lock;
    try {
      lock = await redlock.lock(resource, ttl);
    } catch (e) {
      continue;
    }
    const t = process.hrtime.bigint();
    if (hold > 0) await sleep(hold);
    await lock.unlock().catch(() => {});
    if (t < end) {
      grants.push(t.toString());
      releases.push(process.hrtime.bigint().toString());
    }
    if (think > 0) await sleep(think);
  }
  console.log(JSON.stringify({ grants, releases }));
  clients.forEach((c) => c.disconnect());
}

main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
