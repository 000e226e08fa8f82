'use strict';
// Redlock (the manager) and Semaphore: check the arguments, hand them to the engine.
const native = require('./native');
const errors = require('./errors');
const { Lease, acquired } = require('./lease');
const { Election, Leadership } = require('./election');
const { Calls } = require('./calls');
const opts = require('./options');

const { fromInfo, LeaseLostError, InvalidArgumentError } = errors;

function holdersOf(h) {
  const nodes = h.nodes.map((n) => ({
    state: n.state,
    holder: n.holder ?? null,
    failure: n.failure ?? null,
  }));
  return {
    resource: h.resource,
    key: h.key,
    quorum: h.quorum,
    holder: h.holder ?? null,
    locked: h.holder != null,
    heldOn: nodes.filter((n) => n.state === 'held').length,
    failed: nodes.filter((n) => n.state === 'failed').length,
    nodes,
  };
}

class Semaphore {
  #n;
  #calls;
  #name;
  #nameBytes;
  #permits;

  /** @internal */
  constructor(n, calls, name, nameBytes, permits) {
    this.#n = n;
    this.#calls = calls;
    this.#name = name;
    this.#nameBytes = nameBytes;
    this.#permits = permits;
  }
  get name() {
    return this.#name;
  }
  get permits() {
    return this.#permits;
  }
  /** Takes one permit for ttlMs: a Lease (its `permit` names the slot). */
  async acquire(ttlMs, options) {
    opts.uint32('ttlMs', ttlMs);
    const o = opts.acquireOptions(options, opts.PERMIT_KEYS);
    return acquired(this.#calls, this.#name, o, (cancel, lost) => this.#n.semaphoreAcquire(
      this.#nameBytes, this.#permits, ttlMs, o.waitMs, o.flags, o.owner, o.dropOutMs, o.maxHoldMs,
      o.maxExtensions, cancel, lost));
  }
}

class Redlock {
  #n;
  #calls = new Calls();

  /**
   * A manager over the given Redis masters (quorum N/2+1). Options mirror the Python
   * binding's keywords in camelCase; none connects anything until the first lock.
   */
  constructor(nodes, options) {
    const cfg = opts.managerOptions(nodes, options);
    const r = native.createManager(nodes, cfg);
    if (!(r instanceof native.NativeManager)) throw fromInfo(r);
    this.#n = r;
  }

  get nodeCount() {
    return this.#n.nodeCount;
  }
  get quorum() {
    return this.#n.quorum;
  }

  /**
   * Acquires `resource` for ttlMs: a Lease, or a RedlockError. An array of resources is
   * acquireMany (node-redlock's `acquire` takes an array).
   */
  async acquire(resource, ttlMs, options) {
    if (Array.isArray(resource)) return this.acquireMany(resource, ttlMs, options);
    const res = opts.bytes('resource', resource);
    opts.uint32('ttlMs', ttlMs);
    const o = opts.acquireOptions(options);
    // The engine checks the rest (a TTL above maxTtlMs, an empty resource, combinations)
    // before it sends anything: InvalidArgumentError, a RangeError.
    return acquired(this.#calls, resource, o, (cancel, lost) => this.#n.acquire(res, ttlMs,
      o.waitMs, o.flags, o.owner, o.dropOutMs, o.maxHoldMs, o.maxExtensions, cancel, lost));
  }

  /** Every resource of the list, or none: one Lease for the set. */
  async acquireMany(resources, ttlMs, options) {
    if (!Array.isArray(resources)) {
      throw new TypeError('resources must be an array of strings or Uint8Arrays');
    }
    const res = resources.map((r, i) => opts.bytes(`resources[${i}]`, r));
    opts.uint32('ttlMs', ttlMs);
    const o = opts.acquireOptions(options, opts.MANY_KEYS);
    return acquired(this.#calls, resources.slice(), o, (cancel, lost) => this.#n.acquireMany(res, ttlMs,
      o.waitMs, o.flags, o.owner, o.dropOutMs, o.maxHoldMs, o.maxExtensions, cancel, lost));
  }

  /** The counting semaphore `name` with `permits` (1..1000) permits; sends nothing. */
  semaphore(name, permits) {
    const nameBytes = opts.bytes('name', name);
    opts.uint32('permits', permits);
    this.#calls.check();
    const bad = this.#n.checkSemaphore(nameBytes, permits);
    if (bad) throw fromInfo(bad);
    return new Semaphore(this.#n, this.#calls, name, nameBytes, permits);
  }

  /**
   * The leader election `name` (a string or bytes, checked as a resource); sends nothing.
   * An election and a lock of the same name are independent.
   */
  election(name) {
    const nameBytes = opts.bytes('name', name);
    this.#calls.check();
    const r = this.#n.election(nameBytes);
    if (!(r instanceof native.NativeElection)) throw fromInfo(r);
    return new Election(r, name, this.#calls);
  }

  /**
   * Acquires, runs `routine(signal)` while the lease is renewed, and always releases.
   * `signal` is aborted (its reason a LeaseLostError) if the lease is lost meanwhile.
   * `resource` may be an array (acquireMany). `options` may be left out.
   */
  async using(resource, ttlMs, options, routine) {
    if (typeof options === 'function' && routine === undefined) {
      routine = options;
      options = undefined;
    }
    if (typeof routine !== 'function') throw new TypeError('using needs a routine (a function)');
    const given = options == null ? {} : options;
    if (typeof given !== 'object') throw new TypeError('options must be an object');
    if (given.autoRenew === false) throw new InvalidArgumentError('using always renews: leave out autoRenew');
    const userLost = opts.fn('onLost', given.onLost);
    const controller = new AbortController();
    const onLost = (lease) => {
      controller.abort(new LeaseLostError({
        kind: 'lost',
        message: `the lease was lost: ${lease.lostReason}`,
      }));
      if (userLost) userLost(lease);
    };
    const o = { ...given, autoRenew: true, onLost };
    const lease = Array.isArray(resource)
      ? await this.acquireMany(resource, ttlMs, o)
      : await this.acquire(resource, ttlMs, o);
    let ok = false;
    try {
      const v = await routine(controller.signal, lease);
      ok = true;
      return v;
    } finally {
      try {
        await lease.release();
      } catch (e) {
        // A lost lease, or a routine that threw: its error is the one that matters.
        if (ok && !lease.lost) throw e; // eslint-disable-line no-unsafe-finally
      }
    }
  }

  /** Who holds `resource`, on each node and on a quorum: a snapshot. */
  async holders(resource) {
    const res = opts.bytes('resource', resource);
    const r = await this.#calls.run(undefined, false, () => this.#n.holders(res));
    if (r.kind !== undefined && r.message !== undefined) throw fromInfo(r);
    return holdersOf(r);
  }

  /** The manager's counters and histograms, Prometheus text format. */
  metrics() {
    this.#calls.check();
    return this.#n.metrics();
  }

  /** Per node: { index, addr, quarantined, remainingMs, reason, trusted, runId, rttMs }. */
  nodeStates() {
    this.#calls.check();
    return this.#n.nodeStates();
  }

  /** True once close() was called. */
  get closed() {
    return this.#calls.closed;
  }

  /**
   * Closes the manager: later calls (on it, its semaphores and elections) throw a
   * ClosedError, and the waits in progress (acquisitions with waitMs > 0, campaigns,
   * waitChange and observe) end with one. Resolves once every call in progress has settled.
   * Never releases anything: leases and leaderships stay usable (release, extend, renewal),
   * and the connections close once the last of them is released and collected. Idempotent.
   */
  async close() {
    const settled = this.#calls.close();
    this.#n.close();
    await settled;
  }
}

if (Symbol.asyncDispose) {
  // `await using mgr = new Redlock(...)`: closed when the scope ends.
  Redlock.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

module.exports = { Redlock, Semaphore, Lease, Election, Leadership };
