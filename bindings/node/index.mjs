// The ES module entry: the same objects as the CommonJS one (index.js), exported by name.
import cjs from './index.js';

export const {
  Redlock,
  Semaphore,
  Lease,
  Election,
  Leadership,
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
  MAX_LEADER_VALUE,
  threadsStarted,
  addonPath,
  version,
} = cjs;
export default cjs;
