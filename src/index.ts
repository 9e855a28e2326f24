export { LockClient } from './client.js';
export { RedlockClient } from './redlock/redlock-client.js';
export { RedlockLock } from './redlock/redlock-lock.js';
export type { RedlockClientOptions } from './redlock/options.js';
export { synchronized } from './synchronized.js';
export type { SynchronizedClient, SynchronizedKind, SynchronizedOptions } from './synchronized.js';
export { Lock } from './primitives/lock/lock.js';
export { FencedLock } from './primitives/lock/fenced-lock.js';
export { FencedLease } from './primitives/lock/fenced-lease.js';
export { SimpleLock } from './primitives/simple-lock/simple-lock.js';
export { FairLock } from './primitives/fair-lock/fair-lock.js';
export { ReadLock, ReadWriteLock, WriteLock } from './primitives/read-write-lock/read-write-lock.js';
export { Semaphore } from './primitives/semaphore/semaphore.js';
export type { SemaphoreAcquireOptions } from './primitives/semaphore/options.js';
export { PermitSemaphore } from './primitives/permit-semaphore/permit-semaphore.js';
export { PermitLease } from './primitives/permit-semaphore/permit-lease.js';
export { MultiLock } from './primitives/multi-lock/multi-lock.js';
export { MultiLease } from './primitives/multi-lock/multi-lease.js';
export type { MultiLeaseJSON } from './primitives/multi-lock/multi-lease.js';
export type { LeasesOf, MemberHandle } from './primitives/multi-lock/members.js';
export { CountDownLatch } from './primitives/count-down-latch/count-down-latch.js';
export type { LatchAwaitOptions, LatchSetOptions } from './primitives/count-down-latch/count-down-latch.js';
export { Lease, LockHandle } from './engine/index.js';
export type { LeaseJSON } from './engine/index.js';
export {
  ClientClosedError,
  InvalidArgumentError,
  LockError,
  LockLostError,
  LockNotOwnedError,
  LockReentryError,
  LockTimeoutError,
  LockUpgradeError,
  ReplicationError,
} from './errors.js';
export type { LockErrorCode, LockLostReason } from './errors.js';
export type {
  AcquiredEvent,
  AcquireOptions,
  FairLockOptions,
  FencedLockOptions,
  LockClientEvents,
  LockClientOptions,
  LeaseHeldLongEvent,
  LockLostEvent,
  LockOptions,
  PermitSemaphoreOptions,
  RedisReachableEvent,
  RedisUnreachableEvent,
  SyncReplicasOptions,
  ReleasedEvent,
  RenewFailedEvent,
  SemaphoreOptions,
} from './options.js';
export type {
  IoRedisClient,
  LockRedisClient,
  NodeRedisClient,
  NodeRedisClusterClient,
  NodeRedisSubscriber,
} from './redis/connection.js';
export { MAX_NAME_LENGTH, MAX_PREFIX_LENGTH, MAX_TIME_MS } from './validate.js';
