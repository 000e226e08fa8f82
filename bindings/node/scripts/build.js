#!/usr/bin/env node
'use strict';
// `npm install` (the package's install script): builds the addon with cargo and puts it
// beside package.json as redlock.node. $REDLOCK_NODE_ADDON (a prebuilt file) is copied
// instead, with no build; when this machine's prebuilt package (@redlock-quorum/<platform>-
// <arch>[-musl], README "Prebuilt binaries") is installed, nothing is built either, and Rust
// is not needed. REDLOCK_NODE_SKIP_BUILD=1 does nothing.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { packageName } = require('../lib/platform');

const root = path.join(__dirname, '..');
const out = path.join(root, 'redlock.node');

/** The directory of this machine's installed prebuilt package, or null. */
function prebuilt() {
  try {
    return path.dirname(require.resolve(`${packageName()}/package.json`, { paths: [root] }));
  } catch {
    return null;
  }
}

function main() {
  if (process.env.REDLOCK_NODE_SKIP_BUILD === '1') return;
  if (process.env.REDLOCK_NODE_ADDON) {
    fs.copyFileSync(process.env.REDLOCK_NODE_ADDON, out);
    return;
  }
  const pre = prebuilt();
  if (pre) {
    console.log(`redlock-quorum: using the prebuilt addon of ${packageName()} (${pre}); nothing to build`);
    return;
  }
  const cargo = process.env.CARGO || 'cargo';
  const r = spawnSync(cargo, ['build', '--release', '--manifest-path', path.join(root, 'Cargo.toml')], {
    stdio: 'inherit',
  });
  if (r.error || r.status !== 0) {
    console.error('redlock-quorum: `cargo build --release` failed; Rust is needed to build the addon ' +
      '(or set REDLOCK_NODE_ADDON to a prebuilt redlock.node)');
    process.exit(1);
  }
  const dir = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
  const name = { darwin: 'libredlock_node.dylib', win32: 'redlock_node.dll' }[process.platform] ||
    'libredlock_node.so';
  // Copied to a new file and renamed over the old: a process that has the old one loaded
  // keeps its mapping.
  fs.copyFileSync(path.join(dir, 'release', name), out + '.tmp');
  fs.renameSync(out + '.tmp', out);
}

main();
