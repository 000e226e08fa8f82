'use strict';
// The error classes, one per engine status, each with the per-node outcomes as data.

class RedlockError extends Error {
  constructor(info) {
    super(info.message);
    this.name = new.target.name;
    /**
     * The engine's status: notAcquired, notHeld, unavailable, auth, cancelled, internal; or
     * closed (ClosedError), lost (LeaseLostError).
     */
    this.kind = info.kind;
    this.op = info.op ?? null;
    this.successes = info.successes ?? null;
    this.quorum = info.quorum ?? null;
    this.detail = info.detail ?? null;
    this.expiresInMs = info.expiresInMs ?? null;
    /** One entry per node, in configuration order: { index, addr, outcome, message, ... }. */
    this.nodes = info.nodes ?? [];
  }
}

/** The lock is held elsewhere (too few grants for a quorum, or no validity left). */
class NotAcquiredError extends RedlockError {}
/** Release or extend could not confirm ownership on a quorum. */
class NotHeldError extends RedlockError {}
/** Too many nodes failed for a quorum to be possible. */
class UnavailableError extends RedlockError {}
/** Unavailable because nodes refused this client's credentials. */
class AuthFailedError extends UnavailableError {}
/** The acquisition was cancelled (its AbortSignal aborted); nothing is held. */
class CancelledError extends RedlockError {
  constructor(info, reason) {
    super(info);
    this.code = 'ABORT_ERR';
    if (reason !== undefined) this.cause = reason;
  }
}
/** An operating-system facility failed, or a bug. */
class InternalError extends RedlockError {}
/**
 * The manager was closed (`close()`): a call made after it, or a wait it ended. Leases made
 * before stay usable.
 */
class ClosedError extends RedlockError {}
/** A lease of `using` was lost while its routine ran (the reason of the aborted signal). */
class LeaseLostError extends RedlockError {}

/** Bad input, refused before anything is sent: the engine's rule (a RangeError). */
class InvalidArgumentError extends RangeError {
  constructor(message) {
    super(message);
    this.name = 'InvalidArgumentError';
    this.kind = 'invalidArgument';
    this.nodes = [];
  }
}

const byKind = {
  notAcquired: NotAcquiredError,
  notHeld: NotHeldError,
  unavailable: UnavailableError,
  auth: AuthFailedError,
  cancelled: CancelledError,
  internal: InternalError,
};

/** The error object for the addon's ErrorInfo. */
function fromInfo(info, reason) {
  if (info.kind === 'invalidArgument') return new InvalidArgumentError(info.message);
  const Cls = byKind[info.kind] || InternalError;
  return Cls === CancelledError ? new CancelledError(info, reason) : new Cls(info);
}

module.exports = {
  RedlockError,
  NotAcquiredError,
  NotHeldError,
  UnavailableError,
  AuthFailedError,
  CancelledError,
  InternalError,
  LeaseLostError,
  ClosedError,
  InvalidArgumentError,
  fromInfo,
};
