// The package's two entry points give the same objects, by name, and the types' file exists.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import * as esm from 'redlock-quorum';

const require = createRequire(import.meta.url);

test('ES module and CommonJS export the same names and objects', () => {
  const cjs = require('redlock-quorum');
  const names = ['Redlock', 'Semaphore', 'Lease', 'Election', 'Leadership', 'RedlockError',
    'NotAcquiredError', 'NotHeldError', 'UnavailableError', 'AuthFailedError', 'CancelledError',
    'InternalError', 'LeaseLostError', 'InvalidArgumentError', 'MAX_LEADER_VALUE',
    'threadsStarted', 'version'];
  for (const n of names) {
    assert.ok(n in esm, `ESM lacks ${n}`);
    assert.equal(esm[n], cjs[n], n);
  }
  assert.equal(esm.default, cjs);
  assert.ok(new esm.NotAcquiredError({ kind: 'notAcquired', message: 'x' }) instanceof esm.RedlockError);
  assert.ok(new esm.InvalidArgumentError('x') instanceof RangeError);
  const pkg = require('redlock-quorum/package.json');
  assert.ok(fs.existsSync(new URL(`../${pkg.types}`, import.meta.url)));
  assert.equal(esm.version, pkg.version);
});
