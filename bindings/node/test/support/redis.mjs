// Test helpers: real redis-server processes on free loopback ports, each in its own temporary
// directory with no persistence, killed by PID; and a one-command RESP client to inspect them.
// Every wait is bounded. Nothing here connects anywhere but 127.0.0.1.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { execFileSync } from 'node:child_process';
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

/**
 * Sends one command to 127.0.0.1:port and returns its reply (an error reply throws). A port
 * given as { port, tls } connects over TLS with those options (ca, cert, key).
 */
export function command(port, ...args) {
  return new Promise((resolve, reject) => {
    const sock = typeof port === 'object'
      ? tls.connect({ host: HOST, port: port.port, ...port.tls })
      : net.connect(port, HOST);
    const ready = typeof port === 'object' ? 'secureConnect' : 'connect';
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no reply from port ${JSON.stringify(port.port ?? port)} within 5 s`));
    }, 5000);
    sock.on(ready, () => sock.write(encode(args)));
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

async function startOne(bin, certs) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlock-node-test-'));
    const listen = certs
      ? ['--port', '0', '--tls-port', String(port), '--tls-cert-file', certs.serverCert,
          '--tls-key-file', certs.serverKey, '--tls-ca-cert-file', certs.ca,
          '--tls-auth-clients', 'yes']
      : ['--port', String(port)];
    const child = spawn(bin, [
      ...listen, '--bind', HOST, '--save', '', '--appendonly', 'no',
      '--dir', dir, '--daemonize', 'no', '--protected-mode', 'no', '--loglevel', 'warning',
    ], { stdio: 'ignore' });
    const target = certs ? { port, tls: certs.client } : port;
    let exited = false;
    child.on('exit', () => {
      exited = true;
      live.delete(child.pid);
    });
    live.set(child.pid, child);
    for (let i = 0; i < 200 && !exited; i++) {
      try {
        const info = (await command(target, 'INFO', 'server')).toString();
        if (info.includes(`process_id:${child.pid}\r\n`)) return { port, target, pid: child.pid, child, dir };
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
 * Starts n redis-server nodes: { ports, urls, kill(i), stop(), cmd(i, ...args), existsOn(key) }.
 * With `certs` (from makeCerts), they serve TLS only, with client certificates required.
 */
export async function startNodes(n = 3, certs = null) {
  const bin = redisServerBinary();
  const servers = await Promise.all(Array.from({ length: n }, () => startOne(bin, certs)));
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
    urls: servers.map((s) => `${certs ? 'rediss' : 'redis'}://${HOST}:${s.port}`),
    kill,
    cmd: (i, ...args) => command(servers[i].target, ...args),
    /** On how many nodes `key` exists. */
    async existsOn(key) {
      let n = 0;
      for (let i = 0; i < servers.length; i++) {
        if (!live.has(servers[i].pid)) continue;
        n += await command(servers[i].target, 'EXISTS', key);
      }
      return n;
    },
    async stop() {
      await Promise.all(servers.map((_, i) => kill(i)));
      for (const s of servers) fs.rmSync(s.dir, { recursive: true, force: true });
    },
  };
}

/**
 * Test certificates made for this run with the openssl command, in a temporary directory: a
 * CA, a node certificate for 127.0.0.1 and localhost, a client certificate, and another CA
 * that signed nothing. Returns their paths and the tests' own client options.
 */
export function makeCerts() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redlock-node-tls-'));
  const f = (name) => path.join(dir, name);
  const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ca = (name) => ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`,
    '-out', `${name}.pem`, '-days', '2', '-subj', `/CN=${name}`);
  ca('ca');
  ca('other-ca');
  const signed = (name, cn, ext) => {
    fs.writeFileSync(f(`${name}.ext`), ext);
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`);
  };
  signed('server', '127.0.0.1', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  signed('client', 'redlock-node-test', 'extendedKeyUsage=clientAuth\n');
  return {
    dir,
    ca: f('ca.pem'),
    otherCa: f('other-ca.pem'),
    serverCert: f('server.pem'),
    serverKey: f('server.key'),
    clientCert: f('client.pem'),
    clientKey: f('client.key'),
    client: { ca: fs.readFileSync(f('ca.pem')), cert: fs.readFileSync(f('client.pem')), key: fs.readFileSync(f('client.key')) },
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

export { sleep };
