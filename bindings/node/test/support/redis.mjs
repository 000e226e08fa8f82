// Test helpers: real redis-server processes on free loopback ports, each in its own temporary
// directory with no persistence, killed by PID; and a one-command RESP client to inspect them.
// Every wait is bounded. Nothing here connects anywhere but 127.0.0.1.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const HOST = '127.0.0.1';
const live = new Map(); // pid -> ChildProcess

process.on('exit', () => {
  for (const [pid] of live) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
});

export function redisServerBinary() {
  const name = process.env.REDIS_SERVER || 'redis-server';
  for (const dir of (name.includes('/') ? [''] : (process.env.PATH || '').split(':'))) {
    const p = dir ? path.join(dir, name) : name;
    if (fs.existsSync(p)) return p;
  }
  throw new Error(`${name} not found on PATH: these tests need a real redis-server ` +
    '(apt-get install redis-server, or run .ci/setup)');
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, HOST, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function encode(args) {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
    parts.push(`$${b.length}\r\n`, b, '\r\n');
  }
  return Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p))));
}

// Parses one reply at `at`: [value, next] or null when incomplete.
function parse(buf, at) {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[at]);
  const line = buf.toString('utf8', at + 1, eol);
  const next = eol + 2;
  if (type === '+') return [line, next];
  if (type === '-') return [new Error(line), next];
  if (type === ':') return [Number(line), next];
  if (type === '$') {
    const n = Number(line);
    if (n < 0) return [null, next];
    if (buf.length < next + n + 2) return null;
    return [buf.subarray(next, next + n), next + n + 2];
  }
  if (type === '*') {
    const n = Number(line);
    if (n < 0) return [null, next];
    const out = [];
    let pos = next;
    for (let i = 0; i < n; i++) {
      const r = parse(buf, pos);
      if (!r) return null;
      out.push(r[0]);
      pos = r[1];
    }
    return [out, pos];
  }
  throw new Error(`unexpected RESP type ${type}`);
}

/** Sends one command to 127.0.0.1:port and returns its reply (an error reply throws). */
export function command(port, ...args) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, HOST);
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply from port ${port} within 5 s`));
    }, 5000);
    sock.on('connect', () => sock.write(encode(args)));
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const r = parse(buf, 0);
      if (!r) return;
      clearTimeout(timer);
      sock.destroy();
      if (r[0] instanceof Error) reject(r[0]);
      else resolve(r[0]);
    });
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

async function startOne(bin) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlock-node-test-'));
    const child = spawn(bin, [
      '--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no',
      '--dir', dir, '--daemonize', 'no', '--protected-mode', 'no', '--loglevel', 'warning',
    ], { stdio: 'ignore' });
    let exited = false;
    child.on('exit', () => {
      exited = true;
      live.delete(child.pid);
    });
    live.set(child.pid, child);
    for (let i = 0; i < 200 && !exited; i++) {
      try {
        const info = (await command(port, 'INFO', 'server')).toString();
        if (info.includes(`process_id:${child.pid}\r\n`)) return { port, pid: child.pid, child, dir };
        break; // another server answers on the port: try another one
      } catch {
        await sleep(25);
      }
    }
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {}
    fs.rmSync(dir, { recursive: true, force: true });
  }
  throw new Error('could not start redis-server on a free port in 5 attempts');
}

/**
 * Starts n redis-server nodes: { ports, urls, kill(i), stop(), cmd(i, ...args), exists(key) }.
 */
export async function startNodes(n = 3) {
  const bin = redisServerBinary();
  const servers = await Promise.all(Array.from({ length: n }, () => startOne(bin)));
  const kill = async (i) => {
    const s = servers[i];
    if (!live.has(s.pid)) return;
    const gone = new Promise((r) => s.child.once('exit', r));
    process.kill(s.pid, 'SIGKILL');
    let timer;
    await Promise.race([gone, new Promise((r) => { timer = setTimeout(r, 5000); })]);
    clearTimeout(timer);
  };
  return {
    servers,
    ports: servers.map((s) => s.port),
    urls: servers.map((s) => `redis://${HOST}:${s.port}`),
    kill,
    cmd: (i, ...args) => command(servers[i].port, ...args),
    /** On how many nodes `key` exists. */
    async existsOn(key) {
      let n = 0;
      for (let i = 0; i < servers.length; i++) {
        if (!live.has(servers[i].pid)) continue;
        n += await command(servers[i].port, 'EXISTS', key);
      }
      return n;
    },
    async stop() {
      await Promise.all(servers.map((_, i) => kill(i)));
      for (const s of servers) fs.rmSync(s.dir, { recursive: true, force: true });
    },
  };
}

export { sleep };
