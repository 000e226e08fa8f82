'use strict';
// Loads the addon (redlock.node): the engine and its event-loop side in one file.
//
// The first of these that exists: $REDLOCK_NODE_ADDON (a path; nothing else is tried), the
// file `npm install` built beside package.json, the repository's bindings/node/target build,
// then a prebuilt package for this platform (@redlock-quorum/<platform>-<arch>[-musl]).
const fs = require('node:fs');
const path = require('node:path');
const { packageName } = require('./platform');

function candidates() {
  if (process.env.REDLOCK_NODE_ADDON) return [process.env.REDLOCK_NODE_ADDON];
  const root = path.join(__dirname, '..');
  return [
    path.join(root, 'redlock.node'),
    path.join(root, 'target', 'release', 'libredlock_node.so'),
    packageName(),
  ];
}

/** The addon's exports, with `addonPath`: the file they were loaded from. */
function loaded(exports, file) {
  Object.defineProperty(exports, 'addonPath', { value: file, enumerable: false });
  return exports;
}

function load() {
  const tried = [];
  for (const c of candidates()) {
    const isPath = path.isAbsolute(c);
    if (isPath && !fs.existsSync(c)) {
      tried.push(`${c}: no such file`);
      continue;
    }
    try {
      if (isPath && !c.endsWith('.node')) {
        const m = { exports: {} };
        process.dlopen(m, c);
        return loaded(m.exports, c);
      }
      return loaded(require(c), isPath ? c : require.resolve(c));
    } catch (e) {
      tried.push(`${c}: ${e.message.split('\n')[0]}`);
      if (process.env.REDLOCK_NODE_ADDON) break;
    }
  }
  const err = new Error(
    'redlock-quorum: the native addon was not found (npm install builds it with cargo); tried:\n  ' +
      tried.join('\n  '),
  );
  err.code = 'REDLOCK_ADDON_NOT_FOUND';
  throw err;
}

module.exports = load();
