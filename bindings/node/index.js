'use strict';
// redlock-quorum: the Redlock distributed lock over N independent Redis masters, for Node.js.
// The engine is the Rust library (an N-API addon); this package maps options, leases and
// errors, and never blocks the event loop: every blocking call runs on the binding's own
// threads.
const { Redlock, Semaphore, Lease } = require('./lib/redlock');
const errors = require('./lib/errors');
const native = require('./lib/native');

module.exports = {
  Redlock,
  Semaphore,
  Lease,
  RedlockError: errors.RedlockError,
  NotAcquiredError: errors.NotAcquiredError,
  NotHeldError: errors.NotHeldError,
  UnavailableError: errors.UnavailableError,
  AuthFailedError: errors.AuthFailedError,
  CancelledError: errors.CancelledError,
  InternalError: errors.InternalError,
  LeaseLostError: errors.LeaseLostError,
  InvalidArgumentError: errors.InvalidArgumentError,
  /** Threads the binding has started so far (its own, never libuv's). */
  threadsStarted: () => native.threadsStarted(),
  version: require('./package.json').version,
};
