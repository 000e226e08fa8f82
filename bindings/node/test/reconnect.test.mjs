import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Redlock } from '../index.mjs';
import { startNodes } from './support/redis.mjs';

// The event loop keeps the engine's sockets in an epoll set and remembers which numbers it
// added (native/looped.rs, `enlist`). A socket the server drops is closed by the engine and a
// new one made, often under the same number: the loop must add that one too, or a call waits
// on it until its node times out. This test drops the connection again and again, and each
// lock must still be granted by the one node, well before its 10 s timeout would end the
// wait. It also checks that at least one new socket did take an old one's number, so that
// it exercised that case (Linux: /proc).

const linux = fs.existsSync('/proc/self/net/tcp');

let nodes;
before(async () => {
  nodes = await startNodes(1);
});
after(() => nodes.stop());

/** This process's TCP sockets connected to 127.0.0.1:port: a Map of fd number to inode. */
function socketsTo(port) {
  const inodes = new Set();
  for (const line of fs.readFileSync('/proc/self/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const [, remPort] = f[2].split(':');
    // 01: ESTABLISHED, 02: SYN_SENT.
    if (parseInt(remPort, 16) === port && (f[3] === '01' || f[3] === '02')) inodes.add(f[9]);
  }
  const out = new Map();
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    let target;
    try {
      target = fs.readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue;
    }
    const m = /^socket:\[(\d+)\]$/.exec(target);
    if (m && inodes.has(m[1])) out.set(Number(fd), m[1]);
  }
  return out;
}

test('a connection the server drops is made again, and calls hear the new socket under an old number',
  { skip: !linux && 'needs /proc' }, async () => {
    const mgr = new Redlock(nodes.urls, { retryDelayMs: 1, nodeTimeoutMs: 10000 });
    const port = nodes.ports[0];
    // Up and watched by the loop.
    await (await mgr.acquire('reconnect:warm', 5000, { waitMs: 0 })).release();
    let reused = 0;
    for (let round = 0; round < 20 && reused < 3; round++) {
      const old = socketsTo(port);
      assert.ok(old.size > 0, 'the manager is connected');
      // Every client but this command's own connection.
      const killed = await nodes.cmd(0, 'CLIENT', 'KILL', 'TYPE', 'normal');
      assert.ok(killed >= 1, `killed ${killed}`);
      const lease = await mgr.acquire(`reconnect:${round}`, 5000, { waitMs: 0 });
      await lease.release();
      const now = socketsTo(port);
      for (const [fd, inode] of now) {
        if (old.has(fd) && old.get(fd) !== inode) reused++;
      }
    }
    assert.ok(reused > 0, 'no new socket took an old one\'s number: the case was not exercised');
    await mgr.close();
  });
