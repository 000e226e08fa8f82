// The prebuilt-binary layout, end to end but for the registry: scripts/prebuild.js makes this
// machine's @redlock-quorum/<platform>-<arch> package from the addon these tests load, both
// packages are packed with `npm pack` and installed from the tarballs into a fresh project
// (offline, with cargo replaced by `false`, so any build attempt fails the install), and a
// program there takes a lock on real servers through the prebuilt addon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonPath } from '../index.mjs';
import { startNodes } from './support/redis.mjs';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = (await import('node:module')).createRequire(import.meta.url);
const { packageName, triple } = require('../lib/platform.js');

let nodes;
let dir;
before(async () => {
  nodes = await startNodes(3);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlock-node-prebuilt-'));
});
after(async () => {
  await nodes.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 120000, ...opts });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout.trim();
}

test('a project installs the package and its prebuilt addon from tarballs, builds nothing, and locks', () => {
  const env = { ...process.env, CARGO: 'false', npm_config_cache: path.join(dir, 'npm-cache') };
  delete env.REDLOCK_NODE_ADDON;
  const pre = run(process.execPath, [path.join(root, 'scripts', 'prebuild.js'), '--out', path.join(dir, 'pre')],
    { env: { ...env, REDLOCK_NODE_ADDON: addonPath } });
  assert.equal(pre, path.join(dir, 'pre', triple()));
  const meta = JSON.parse(fs.readFileSync(path.join(pre, 'package.json'), 'utf8'));
  assert.equal(meta.name, packageName());
  assert.deepEqual(meta.os, [process.platform]);
  assert.deepEqual(meta.cpu, [process.arch]);

  const packs = path.join(dir, 'packs');
  fs.mkdirSync(packs);
  const pack = (cwd) => path.join(packs, run('npm', ['pack', '--silent', '--pack-destination', packs],
    { cwd, env }).split('\n').pop());
  const main = pack(root);
  const platform = pack(pre);

  const proj = path.join(dir, 'proj');
  fs.mkdirSync(proj);
  fs.writeFileSync(path.join(proj, 'package.json'), '{"name":"proj","version":"1.0.0","private":true}\n');
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', main, platform], { cwd: proj, env });
  assert.equal(fs.existsSync(path.join(proj, 'node_modules', 'redlock-quorum', 'redlock.node')), false,
    'the install built or copied an addon');

  const program = `
    import { Redlock, addonPath } from 'redlock-quorum';
    const mgr = new Redlock(${JSON.stringify(nodes.urls)});
    const lease = await mgr.acquire('prebuilt:1', 5000, { waitMs: 0 });
    await lease.release();
    await mgr.close();
    console.log(addonPath);
  `;
  fs.writeFileSync(path.join(proj, 'main.mjs'), program);
  const loaded = run(process.execPath, ['main.mjs'], { cwd: proj, env });
  assert.equal(fs.realpathSync(loaded),
    fs.realpathSync(path.join(proj, 'node_modules', ...packageName().split('/'), 'redlock.node')));
});
