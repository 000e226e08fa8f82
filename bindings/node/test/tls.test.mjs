// TLS against nodes that serve TLS only and require client certificates (made for the run
// with openssl): the manager's tls options carried to the engine.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redlock, UnavailableError, InvalidArgumentError } from '../index.mjs';
import { startNodes, makeCerts } from './support/redis.mjs';

let certs;
let nodes;
before(async () => {
  certs = makeCerts();
  nodes = await startNodes(3, certs);
});
after(async () => {
  await nodes.stop();
  certs.remove();
});

const tlsOptions = () => ({
  tlsCaFile: certs.ca, tlsClientCert: certs.clientCert, tlsClientKey: certs.clientKey,
});

test('lock, extend and unlock over mutual TLS', async () => {
  const mgr = new Redlock(nodes.urls, tlsOptions());
  const lease = await mgr.acquire('tls:1', 5000, { waitMs: 0, fenced: true });
  assert.equal(await nodes.existsOn('redlock:tls:1'), 3);
  await lease.extend(20000);
  assert.ok((await nodes.cmd(0, 'PTTL', 'redlock:tls:1')) > 15000);
  await lease.release();
  assert.equal(await nodes.existsOn('redlock:tls:1'), 0);
});

test('refused without a client certificate, or trusting another CA; the server name override', async () => {
  const noCert = new Redlock(nodes.urls, { tlsCaFile: certs.ca, connectTimeoutMs: 1000 });
  await assert.rejects(noCert.acquire('tls:2', 1000, { waitMs: 0 }), UnavailableError);
  const otherCa = new Redlock(nodes.urls, { ...tlsOptions(), tlsCaFile: certs.otherCa, connectTimeoutMs: 1000 });
  await assert.rejects(otherCa.acquire('tls:2', 1000, { waitMs: 0 }), (e) => {
    assert.ok(e instanceof UnavailableError);
    assert.ok(e.nodes.some((n) => n.outcome === 'tls'), JSON.stringify(e.nodes));
    return true;
  });
  const named = new Redlock(nodes.urls, { ...tlsOptions(), tlsServerName: 'localhost' });
  await (await named.acquire('tls:3', 1000, { waitMs: 0 })).release();
  const skip = new Redlock(nodes.urls, {
    tlsClientCert: certs.clientCert, tlsClientKey: certs.clientKey, tlsInsecureSkipVerify: true,
  });
  await (await skip.acquire('tls:4', 1000, { waitMs: 0 })).release();
  assert.throws(() => new Redlock(nodes.urls, { ...tlsOptions(), tlsClientKey: certs.serverCert }),
    InvalidArgumentError);
});
