export { LockClient } from './client.js';
export { Lock } from './locks/lock.js';
export { Lease } from './lease.js';
export {
  ClientClosedError,
  InvalidArgumentError,
  LockError,
  LockLostError,
  LockNotOwnedError,
  LockReentryError,
  LockTimeoutError,
} from './errors.js';
export type { LockErrorCode, LockLostReason } from './errors.js';
export type {
  AcquiredEvent,
  AcquireOptions,
  LockClientEvents,
  LockClientOptions,
  LockedCallback,
  LockLostEvent,
  LockOptions,
  ReleasedEvent,
  RenewFailedEvent,
} from './options.js';
export type { LockRedisClient, LockSubscriberClient } from './redis.js';
export { MAX_NAME_LENGTH, MAX_PREFIX_LENGTH, MAX_TIME_MS } from './validate.js';
