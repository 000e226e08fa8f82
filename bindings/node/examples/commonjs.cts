// CommonJS: the same names, through require.
import redlock = require('redlock-quorum');

async function main(): Promise<void> {
  const mgr = new redlock.Redlock(['redis://127.0.0.1:7001']);
  const lease = await mgr.acquire(Buffer.from('bytes-resource'), 1_000, { waitMs: 0 });
  await lease.release();
}
void main;
