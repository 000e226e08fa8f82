// Runs every `js` block of README.md as an ES module in a child process, with `nodes` defined
// (three fresh redis-server nodes), and checks that it exits cleanly.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startNodes } from './support/redis.mjs';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
const entry = pathToFileURL(path.join(root, 'index.mjs')).href;

let nodes;
let dir;
before(async () => {
  nodes = await startNodes(3);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlock-node-readme-'));
});
after(async () => {
  await nodes.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('the README has js blocks', () => assert.ok(blocks.length >= 2, `${blocks.length} blocks`));

blocks.forEach((code, i) => {
  test(`README js block ${i + 1} runs`, async () => {
    const file = path.join(dir, `block${i}.mjs`);
    const src = `const nodes = ${JSON.stringify(nodes.urls)};\n` +
      code.replaceAll("'redlock-quorum'", JSON.stringify(entry));
    fs.writeFileSync(file, src);
    const r = spawnSync(process.execPath, ['--harmony', file], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 0, `block ${i + 1}:\n${r.stderr}`);
    assert.equal(r.stderr, '');
  });
});
