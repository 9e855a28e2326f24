export { LockClient } from './client.js';
export { synchronized } from './synchronized.js';
export type { SynchronizedClient, SynchronizedKind, SynchronizedOptions } from './synchronized.js';
export { Lock } from './primitives/lock/lock.js';
export { FencedLock } from './primitives/lock/fenced-lock.js';
export { FencedLease } from './primitives/lock/fenced-lease.js';
export { SimpleLock } from './primitives/simple-lock/simple-lock.js';
export { LockHandle } from './engine/handle.js';
export { Lease } from './engine/lease.js';
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
  FencedLockOptions,
  LockClientEvents,
  LockClientOptions,
  LeaseHeldLongEvent,
  LockedCallback,
  LockLostEvent,
  LockOptions,
  ReleasedEvent,
  RenewFailedEvent,
} from './options.js';
export type {
  IoRedisClient,
  LockRedisClient,
  NodeRedisClient,
  NodeRedisSubscriber,
} from './redis/connection.js';
export { MAX_NAME_LENGTH, MAX_PREFIX_LENGTH, MAX_TIME_MS } from './validate.js';
