'use strict';
// Calls: a manager's calls in progress, so that `close()` can end its waits and tell when
// every call has settled; and the one place where an AbortSignal becomes the engine's cancel
// handle.
const { fromInfo, ClosedError } = require('./errors');
const native = require('./native');

function closedError() {
  return new ClosedError({ kind: 'closed', message: 'closed: the manager was closed' });
}

class Calls {
  #closed = false;
  #running = 0;
  /** Cancel handles of the calls that may wait, fired by close(). */
  #waits = new Set();
  /** Resolvers of close() calls waiting for #running to reach 0. */
  #idle = [];

  get closed() {
    return this.#closed;
  }

  /** Throws a ClosedError once the manager was closed. */
  check() {
    if (this.#closed) throw closedError();
  }

  /**
   * Runs one call, `start(cancel)` (the addon's call, a Promise). `cancel` is a cancel handle
   * when `signal` is given or the call `waits` (close() then fires it), else undefined. An
   * already aborted signal, or a closed manager, sends nothing. A call cancelled by close()
   * (not by its signal) gives a ClosedError instead of its cancelled outcome. Resolves with
   * what the addon gave.
   */
  async run(signal, waits, start) {
    this.check();
    if (signal && signal.aborted) {
      const info = { kind: 'cancelled', message: 'cancelled: the signal was already aborted' };
      throw fromInfo(info, signal.reason);
    }
    const cancel = signal || waits ? new native.NativeCancel() : undefined;
    let onAbort;
    if (signal) {
      onAbort = () => cancel.fire();
      signal.addEventListener('abort', onAbort, { once: true });
    }
    if (waits) this.#waits.add(cancel);
    this.#running++;
    let r;
    try {
      r = await start(cancel);
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
      if (waits) this.#waits.delete(cancel);
      if (--this.#running === 0) this.#settled();
    }
    if (this.#closed && r && r.kind === 'cancelled' && !(signal && signal.aborted)) {
      throw closedError();
    }
    return r;
  }

  /**
   * Closes: later calls throw a ClosedError, the waits in progress end with one; resolves
   * once every call in progress has settled. Idempotent.
   */
  close() {
    if (!this.#closed) {
      this.#closed = true;
      for (const c of this.#waits) c.fire();
    }
    if (this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #settled() {
    const idle = this.#idle;
    this.#idle = [];
    // After the current microtasks: the last call's own Promise (and what its caller chained
    // on it) settles first.
    if (idle.length) setImmediate(() => idle.forEach((resolve) => resolve()));
  }
}

module.exports = { Calls };
