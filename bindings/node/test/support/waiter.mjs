// A worker thread that starts a wait on a held lock and says so; the test then terminates it.
// The wait is fenced: each grant raises the resource's fencing counter, which the test reads.
import { parentPort, workerData } from 'node:worker_threads';
import { Redlock } from '../../index.mjs';

const mgr = new Redlock(workerData.urls);
mgr.acquire(workerData.resource, 5000, { waitMs: 30000, fenced: true }).then((l) => l.release(), () => {});
setTimeout(() => parentPort.postMessage('waiting'), 100);
