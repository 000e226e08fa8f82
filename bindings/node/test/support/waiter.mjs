// A worker thread that starts a wait on a held lock and says so; the test then terminates it.
import { parentPort, workerData } from 'node:worker_threads';
import { Redlock } from '../../index.mjs';

const mgr = new Redlock(workerData.urls);
mgr.acquire(workerData.resource, 5000, { waitMs: 30000 }).then((l) => l.release(), () => {});
setTimeout(() => parentPort.postMessage('waiting'), 100);
