// One contender of the mutual-exclusion test, run as a worker thread (workerData) or as a
// child process (argv[2]: JSON). It takes the lock `rounds` times; inside, INCR of a witness
// key on a separate redis-server must return 1 (no one else inside), then DECR.
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Redlock } from '../../index.mjs';
import { command, sleep } from './redis.mjs';

const args = isMainThread ? JSON.parse(process.argv[2]) : workerData;
const mgr = new Redlock(args.urls, { retryDelayMs: 20 });
let overlaps = 0;
let sections = 0;
for (let i = 0; i < args.rounds; i++) {
  const lease = await mgr.acquire(args.resource, 10000, { waitMs: 60000 });
  const inside = await command(args.witness, 'INCR', 'inside');
  if (inside !== 1) overlaps++;
  await command(args.witness, 'INCR', 'sections');
  await sleep(1);
  await command(args.witness, 'DECR', 'inside');
  sections++;
  await lease.release();
}
const result = { overlaps, sections };
if (isMainThread) console.log(JSON.stringify(result));
else parentPort.postMessage(result);
