'use strict';
// Lease: the handle every acquisition returns. Its facts are read from the engine at once
// (no I/O); release and extend run on the event loop without blocking it.
const { fromInfo } = require('./errors');
const { uint32, acquireOptions } = require('./options');
const native = require('./native');

class Lease {
  #n;
  #resource;
  #released = false;

  /** @internal */
  constructor(n, resource) {
    this.#n = n;
    this.#resource = resource;
  }

  /** What was locked, as given: a string or bytes (an array of them for acquireMany). */
  get resource() {
    return this.#resource;
  }
  /** Every resource the lease holds, an array: [resource], or those given to acquireMany. */
  get resources() {
    return Array.isArray(this.#resource) ? this.#resource.slice() : [this.#resource];
  }
  /** Remaining validity in ms (0 once expired, released or lost). */
  get validityMs() {
    return this.#n.validityMs;
  }
  get ttlMs() {
    return this.#n.ttlMs;
  }
  /** The fencing token (a bigint) of a fenced lease, else null. */
  get fencingToken() {
    return this.#n.fencingToken ?? null;
  }
  /** A fair lease's ticket (a bigint) when it waited in the queue, else null. */
  get ticket() {
    return this.#n.ticket ?? null;
  }
  /** True once renewal failed or reached a bound. */
  get lost() {
    return this.#n.lost;
  }
  get lostReason() {
    return this.#n.lostReason ?? null;
  }
  get renewing() {
    return this.#n.renewing;
  }
  get released() {
    return this.#released;
  }
  /** The random token that makes this lease unique (40 hex characters). */
  get token() {
    return this.#n.token;
  }
  /** What the lease stores on the nodes (the token, and for a plain lock its time and label). */
  get value() {
    return this.#n.value;
  }
  /** The Redis key (bytes). */
  get key() {
    return this.#n.key;
  }
  get shared() {
    return this.#n.shared;
  }
  get fair() {
    return this.#n.fair;
  }
  /** For a semaphore's permit: { permits, slot }; else null. */
  get permit() {
    return this.#n.permit ?? null;
  }

  /** Releases the lock on every node (stops renewal first). */
  async release() {
    const e = await this.#n.release();
    if (e) throw fromInfo(e);
    this.#released = true;
  }

  /** Sets the lock's TTL to ttlMs from now on a quorum; the lease's validity restarts. */
  async extend(ttlMs) {
    uint32('ttlMs', ttlMs);
    const e = await this.#n.extend(ttlMs);
    if (e) throw fromInfo(e);
  }

  /** Renews the lease in the background until released or a bound is reached. */
  autoRenew(options) {
    const o = acquireOptions({ ...(options ?? {}), autoRenew: true },
      ['autoRenew', 'maxHoldMs', 'maxExtensions', 'onLost'], 'autoRenew options');
    const cb = o.onLost ? () => o.onLost(this) : undefined;
    const e = this.#n.autoRenew(o.maxHoldMs, o.maxExtensions, cb);
    if (e) throw fromInfo(e);
  }

  /** Stops renewal (the lease then runs out at its TTL unless extended or released). */
  stopRenewal() {
    this.#n.stopRenewal();
  }
}

if (Symbol.asyncDispose) {
  // `await using lease = await mgr.acquire(...)`: released when the scope ends (a lease
  // already released is left alone; a lost one is released best-effort, without an error).
  Lease.prototype[Symbol.asyncDispose] = async function dispose() {
    if (this.released) return;
    try {
      await this.release();
    } catch (e) {
      if (!this.lost) throw e;
    }
  };
}

/**
 * Runs one acquisition through the manager's `calls`: `start(cancel, lost)` calls the addon.
 * The AbortSignal (and close(), for an acquisition that may wait) fires the engine's cancel
 * handle; onLost gets the Lease.
 */
async function acquired(calls, resource, o, start) {
  const { signal, onLost } = o;
  let lease = null;
  let lostEarly = false;
  const lost = onLost
    ? () => {
        if (lease) onLost(lease);
        else lostEarly = true;
      }
    : undefined;
  const r = await calls.run(signal, o.waitMs > 0, (cancel) => start(cancel, lost));
  if (!(r instanceof native.NativeLease)) throw fromInfo(r, signal && signal.reason);
  lease = new Lease(r, resource);
  if (lostEarly) queueMicrotask(() => onLost(lease));
  return lease;
}

module.exports = { Lease, acquired };
