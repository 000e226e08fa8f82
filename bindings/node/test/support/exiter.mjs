// Takes leases (a plain one, a renewing one, a held one waited on) and exits without releasing
// anything: argv[3] `exit` calls process.exit(0) with the wait still pending; `drain` lets the
// event loop run dry (the renewing lease's thread must not keep the process alive).
import { Redlock } from '../../index.mjs';

const urls = JSON.parse(process.argv[2]);
const mode = process.argv[3];
const mgr = new Redlock(urls);
await mgr.acquire(`exit:${mode}:plain`, 5000);
await mgr.acquire(`exit:${mode}:renewing`, 5000, { autoRenew: true });
if (mode === 'exit') {
  mgr.acquire(`exit:${mode}:plain`, 5000, { waitMs: 30000 }).catch(() => {});
  setTimeout(() => process.exit(0), 100);
}
console.log('held');
