'use strict';
// redlock-quorum: the Redlock distributed lock over N independent Redis masters, for Node.js.
// The engine is the Rust library (an N-API addon); this package maps options, leases and
// errors, and never blocks the event loop: every blocking call runs on the binding's own
// threads.
const { Redlock, Semaphore, Lease, Election, Leadership } = require('./lib/redlock');
const { MAX_LEADER_VALUE } = require('./lib/election');
const errors = require('./lib/errors');
const native = require('./lib/native');

module.exports = {
  Redlock,
  Semaphore,
  Lease,
  Election,
  Leadership,
  RedlockError: errors.RedlockError,
  NotAcquiredError: errors.NotAcquiredError,
  NotHeldError: errors.NotHeldError,
  UnavailableError: errors.UnavailableError,
  AuthFailedError: errors.AuthFailedError,
  CancelledError: errors.CancelledError,
  InternalError: errors.InternalError,
  LeaseLostError: errors.LeaseLostError,
  ClosedError: errors.ClosedError,
  InvalidArgumentError: errors.InvalidArgumentError,
  /** The most bytes a leader's value may have. */
  MAX_LEADER_VALUE,
  /** Threads the binding has started so far (its own, never libuv's). */
  threadsStarted: () => native.threadsStarted(),
  /** The file the native addon was loaded from (README "Which addon is loaded"). */
  addonPath: native.addonPath,
  version: require('./package.json').version,
};
