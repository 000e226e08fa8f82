#!/usr/bin/env node
'use strict';
// Makes this machine's prebuilt addon package (README "Prebuilt binaries"):
//
//   node scripts/prebuild.js [--out DIR]        (DIR defaults to ./prebuilt)
//
// writes DIR/<platform>-<arch>[-musl]/ with package.json (@redlock-quorum/<…>, the same
// version as redlock-quorum, `os`, `cpu`, `libc` on Linux, `main: redlock.node`), the addon
// and a README, ready for `npm pack` or `npm publish`, and prints the directory. The addon is
// $REDLOCK_NODE_ADDON if set, else the redlock.node that `npm install` built beside
// package.json (built now with scripts/build.js if it is missing).
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { libc, triple, packageName } = require('../lib/platform');

const root = path.join(__dirname, '..');

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
}

function addon() {
  if (process.env.REDLOCK_NODE_ADDON) return process.env.REDLOCK_NODE_ADDON;
  const built = path.join(root, 'redlock.node');
  if (!fs.existsSync(built)) {
    const r = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { stdio: 'inherit' });
    if (r.status !== 0) process.exit(r.status || 1);
  }
  return built;
}

function main() {
  const main = require(path.join(root, 'package.json'));
  const dir = path.resolve(arg('out', path.join(root, 'prebuilt')), triple());
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(addon(), path.join(dir, 'redlock.node'));
  const pkg = {
    name: packageName(),
    version: main.version,
    description: `The native addon of ${main.name} for ${triple()}.`,
    license: main.license,
    os: [process.platform],
    cpu: [process.arch],
    ...(process.platform === 'linux' ? { libc: [libc() ? 'musl' : 'glibc'] } : {}),
    main: 'redlock.node',
    files: ['redlock.node'],
  };
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.writeFileSync(path.join(dir, 'README.md'),
    `# ${pkg.name}\n\nThe prebuilt native addon of \`${main.name}\` for ${triple()}. ` +
    `Install \`${main.name}\`, which loads it; this package is not used on its own.\n`);
  console.log(dir);
}

main();
