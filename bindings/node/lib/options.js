'use strict';
// Argument checks: a wrong type is a TypeError, a number out of range a RangeError, both
// before anything reaches the engine. The engine's own rules (a TTL above maxTtlMs, an
// empty resource, option combinations) come back as InvalidArgumentError, a RangeError.
const { InvalidArgumentError } = require('./errors');

const U32 = 0xffffffff;

function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? (v.constructor && v.constructor.name) || 'object' : typeof v;
}

function uint32(name, v) {
  if (typeof v !== 'number') throw new TypeError(`${name} must be a number, not ${describe(v)}`);
  if (!Number.isInteger(v) || v < 0 || v > U32) {
    throw new RangeError(`${name} must be an integer in 0..${U32}, not ${v}`);
  }
  return v;
}

function optUint32(name, v) {
  return v === undefined || v === null ? undefined : uint32(name, v);
}

function bool(name, v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new TypeError(`${name} must be a boolean, not ${describe(v)}`);
  return v;
}

function str(name, v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new TypeError(`${name} must be a string, not ${describe(v)}`);
  return v;
}

/** A resource name (or owner, prefix): a string (UTF-8) or bytes. */
function bytes(name, v) {
  if (typeof v === 'string') return Buffer.from(v, 'utf8');
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw new TypeError(`${name} must be a string or a Uint8Array, not ${describe(v)}`);
}

function fn(name, v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'function') throw new TypeError(`${name} must be a function, not ${describe(v)}`);
  return v;
}

function plainObject(name, v) {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) {
    throw new TypeError(`${name} must be an object, not ${describe(v)}`);
  }
  return v;
}

function known(name, o, keys) {
  for (const k of Object.keys(o)) {
    if (!keys.includes(k) && o[k] !== undefined) {
      throw new TypeError(`${name}: unknown option ${JSON.stringify(k)} (known: ${keys.join(', ')})`);
    }
  }
}

function signal(v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || typeof v.aborted !== 'boolean' || typeof v.addEventListener !== 'function') {
    throw new TypeError(`signal must be an AbortSignal, not ${describe(v)}`);
  }
  return v;
}

const ACQUIRE_KEYS = [
  'waitMs', 'fenced', 'notify', 'owner', 'shared', 'fair', 'dropOutMs',
  'autoRenew', 'maxHoldMs', 'maxExtensions', 'onLost', 'signal',
];
// acquireMany and a semaphore's acquire take these only (the engine refuses the others).
const MANY_KEYS = ['waitMs', 'autoRenew', 'maxHoldMs', 'maxExtensions', 'onLost', 'signal'];
const PERMIT_KEYS = [...MANY_KEYS, 'fenced', 'notify'];

const FLAG_FENCED = 1;
const FLAG_NO_NOTIFY = 2;
const FLAG_SHARED = 4;
const FLAG_FAIR = 8;
const FLAG_AUTO_RENEW = 16;

const NONE = Object.freeze({
  waitMs: -1, flags: 0, owner: undefined, dropOutMs: 0, maxHoldMs: 0, maxExtensions: 0,
  signal: undefined, onLost: undefined,
});

/**
 * An acquisition's options, checked and packed as the addon reads them: waitMs (−1: the
 * retry policy), flags (the booleans as bits), owner, dropOutMs, maxHoldMs, maxExtensions
 * (0: the defaults), and signal and onLost for lib/lease.js.
 */
function acquireOptions(o, keys = ACQUIRE_KEYS, what = 'options') {
  if (o === undefined || o === null) return NONE;
  o = plainObject(what, o);
  known(what, o, keys);
  const wait = optUint32('waitMs', o.waitMs);
  let flags = 0;
  if (bool('fenced', o.fenced)) flags |= FLAG_FENCED;
  if (bool('notify', o.notify) === false) flags |= FLAG_NO_NOTIFY;
  if (bool('shared', o.shared)) flags |= FLAG_SHARED;
  if (bool('fair', o.fair)) flags |= FLAG_FAIR;
  const autoRenew = bool('autoRenew', o.autoRenew);
  if (autoRenew) flags |= FLAG_AUTO_RENEW;
  const packed = {
    waitMs: wait === undefined ? -1 : wait,
    flags,
    owner: o.owner === undefined || o.owner === null ? undefined : bytes('owner', o.owner),
    dropOutMs: optUint32('dropOutMs', o.dropOutMs) ?? 0,
    maxHoldMs: optUint32('maxHoldMs', o.maxHoldMs) ?? 0,
    maxExtensions: optUint32('maxExtensions', o.maxExtensions) ?? 0,
    signal: signal(o.signal),
    onLost: fn('onLost', o.onLost),
  };
  if (!autoRenew) {
    if (packed.maxHoldMs || packed.maxExtensions) {
      throw new InvalidArgumentError('maxHoldMs and maxExtensions need autoRenew: true');
    }
    if (packed.onLost) throw new InvalidArgumentError('onLost needs autoRenew: true');
  }
  return packed;
}

// A campaign takes these (a leadership is always fenced, and neither reentrant, shared nor
// fair). Its renewal is always on: `autoRenew: true` bounds it (maxHoldMs, maxExtensions),
// and onLost works either way.
const CAMPAIGN_KEYS = ['waitMs', 'notify', 'autoRenew', 'maxHoldMs', 'maxExtensions', 'onLost', 'signal'];

/** A campaign's options, checked and packed as acquireOptions packs an acquisition's. */
function campaignOptions(o) {
  if (o === undefined || o === null) return NONE;
  o = plainObject('options', o);
  known('options', o, CAMPAIGN_KEYS);
  const onLost = fn('onLost', o.onLost);
  return { ...acquireOptions({ ...o, onLost: undefined }, CAMPAIGN_KEYS), onLost };
}

/** Options that are only `{ signal }`. */
function signalOptions(o) {
  o = plainObject('options', o);
  known('options', o, ['signal']);
  return { signal: signal(o.signal) };
}

const MANAGER_KEYS = [
  'retryCount', 'retryDelayMs', 'driftFactor', 'connectTimeoutMs', 'nodeTimeoutMs', 'maxTtlMs',
  'restartQuarantine', 'label', 'keyPrefix', 'tlsCaFile', 'tlsClientCert', 'tlsClientKey',
  'tlsServerName', 'tlsInsecureSkipVerify', 'sentinelUsername', 'sentinelPassword',
  'replicaAcks', 'replicaAckTimeoutMs',
];

/** The nodes and a manager's options, checked. */
function managerOptions(nodes, o) {
  if (!Array.isArray(nodes)) {
    throw new TypeError(`nodes must be an array of URL strings, not ${describe(nodes)}`);
  }
  nodes.forEach((n, i) => {
    if (typeof n !== 'string') throw new TypeError(`nodes[${i}] must be a string, not ${describe(n)}`);
  });
  o = plainObject('options', o);
  known('options', o, MANAGER_KEYS);
  const drift = o.driftFactor;
  if (drift !== undefined && drift !== null && typeof drift !== 'number') {
    throw new TypeError(`driftFactor must be a number, not ${describe(drift)}`);
  }
  if ((o.tlsClientCert == null) !== (o.tlsClientKey == null)) {
    throw new TypeError('tlsClientCert and tlsClientKey go together: give both or neither');
  }
  if (o.sentinelUsername != null && o.sentinelPassword == null) {
    throw new TypeError('sentinelUsername needs sentinelPassword');
  }
  const native = {
    retryCount: optUint32('retryCount', o.retryCount),
    retryDelayMs: optUint32('retryDelayMs', o.retryDelayMs),
    driftFactor: drift ?? undefined,
    connectTimeoutMs: optUint32('connectTimeoutMs', o.connectTimeoutMs),
    nodeTimeoutMs: optUint32('nodeTimeoutMs', o.nodeTimeoutMs),
    maxTtlMs: optUint32('maxTtlMs', o.maxTtlMs),
    restartQuarantine: bool('restartQuarantine', o.restartQuarantine),
    label: str('label', o.label),
    keyPrefix: o.keyPrefix == null ? undefined : bytes('keyPrefix', o.keyPrefix),
    tlsCaFile: str('tlsCaFile', o.tlsCaFile),
    tlsClientCert: str('tlsClientCert', o.tlsClientCert),
    tlsClientKey: str('tlsClientKey', o.tlsClientKey),
    tlsServerName: str('tlsServerName', o.tlsServerName),
    tlsInsecureSkipVerify: bool('tlsInsecureSkipVerify', o.tlsInsecureSkipVerify),
    sentinelUsername: str('sentinelUsername', o.sentinelUsername),
    sentinelPassword: str('sentinelPassword', o.sentinelPassword),
    replicaAcks: optUint32('replicaAcks', o.replicaAcks),
    replicaAckTimeoutMs: optUint32('replicaAckTimeoutMs', o.replicaAckTimeoutMs),
  };
  for (const k of Object.keys(native)) if (native[k] === undefined) delete native[k];
  return native;
}

module.exports = {
  uint32,
  bytes,
  fn,
  acquireOptions,
  campaignOptions,
  signalOptions,
  managerOptions,
  ACQUIRE_KEYS,
  MANY_KEYS,
  PERMIT_KEYS,
  CAMPAIGN_KEYS,
};
