/**
 * What went wrong, as a string users can switch on.
 *
 * - `INVALID_ARGUMENT`: a name, time or option was rejected before any Redis command was sent.
 * - `ACQUIRE_TIMEOUT`: the lock stayed held by another owner for the whole `waitMs`.
 * - `NOT_OWNER`: a release or an operation on a lease that no longer holds its lock.
 * - `LOCK_LOST`: a held lock was lost (deleted, expired, force-released, or not confirmed in time).
 * - `REENTRY_REJECTED`: a non-reentrant lock was asked for again from the async context holding it.
 * - `UPGRADE_REJECTED`: the write lock of a read-write lock was asked for by an owner holding its
 *   read lock, which would wait for itself forever.
 * - `CLIENT_CLOSED`: the {@link LockClient} was closed.
 * - `REDIS_ERROR`: Redis could not be reached or answered with an error; `cause` has the details.
 * - `UNSUPPORTED_SERVER`: the Redis server is older than latchkey needs (6.0.6); every acquire
 *   of the client rejects with it.
 * - `NOT_REPLICATED`: with `syncReplicas`, too few replicas acknowledged a grant (of a lock, or
 *   of a semaphore's permits) within its `timeoutMs`; the grant was rolled back (see
 *   {@link ReplicationError}).
 */
export type LockErrorCode =
  | 'INVALID_ARGUMENT'
  | 'ACQUIRE_TIMEOUT'
  | 'NOT_OWNER'
  | 'LOCK_LOST'
  | 'REENTRY_REJECTED'
  | 'UPGRADE_REJECTED'
  | 'CLIENT_CLOSED'
  | 'REDIS_ERROR'
  | 'UNSUPPORTED_SERVER'
  | 'NOT_REPLICATED';

/**
 * Base class of every error latchkey throws. Messages name the lock, never its owner token.
 *
 * @example
 * ```ts
 * try {
 *   await lock.acquire({ waitMs: 1_000 });
 * } catch (error) {
 *   if (error instanceof LockError && error.code === 'ACQUIRE_TIMEOUT') return;
 *   throw error;
 * }
 * ```
 */
export class LockError extends Error {
  override readonly name: string = 'LockError';
  readonly code: LockErrorCode;

  constructor(code: LockErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** The lock was still held by another owner when `waitMs` ran out. Code `ACQUIRE_TIMEOUT`. */
export class LockTimeoutError extends LockError {
  override readonly name = 'LockTimeoutError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('ACQUIRE_TIMEOUT', message, options);
  }
}

/** The caller does not (or no longer) hold the lock it tried to release. Code `NOT_OWNER`. */
export class LockNotOwnedError extends LockError {
  override readonly name = 'LockNotOwnedError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('NOT_OWNER', message, options);
  }
}

/** Why a held lock was lost. */
export type LockLostReason =
  /** A renewal or a nested acquire found the lock gone or held by another owner. */
  | 'not-owner'
  /** No renewal was confirmed before the lease ran out (Redis unreachable or too slow). */
  | 'expired'
  /** `forceUnlock()` was called on this client. */
  | 'force-unlocked'
  /** The {@link LockClient} was closed while the lock was held. */
  | 'client-closed';

/** A held lock was lost; `lease.signal` aborts with this error. Code `LOCK_LOST`. */
export class LockLostError extends LockError {
  override readonly name = 'LockLostError';
  readonly reason: LockLostReason;
  constructor(message: string, reason: LockLostReason, options?: { cause?: unknown }) {
    super('LOCK_LOST', message, options);
    this.reason = reason;
  }
}

/** A name, time or option was rejected before any Redis command. Code `INVALID_ARGUMENT`. */
export class InvalidArgumentError extends LockError {
  override readonly name = 'InvalidArgumentError';
  constructor(message: string) {
    super('INVALID_ARGUMENT', message);
  }
}

/** The {@link LockClient} was closed. Code `CLIENT_CLOSED`. */
export class ClientClosedError extends LockError {
  override readonly name = 'ClientClosedError';
  constructor(message = 'The LockClient is closed') {
    super('CLIENT_CLOSED', message);
  }
}

/**
 * A non-reentrant lock was requested again from the async context that holds it, which
 * would otherwise wait for itself forever. Code `REENTRY_REJECTED`.
 */
export class LockReentryError extends LockError {
  override readonly name = 'LockReentryError';
  constructor(message: string) {
    super('REENTRY_REJECTED', message);
  }
}

/**
 * The write lock of a read-write lock was requested by an owner that holds its read lock: an
 * upgrade, which would wait for its own read lock forever (Redisson deadlocks there). Release the
 * read lock first, or take the write lock from the start. Code `UPGRADE_REJECTED`.
 */
export class LockUpgradeError extends LockError {
  override readonly name = 'LockUpgradeError';
  constructor(message: string) {
    super('UPGRADE_REJECTED', message);
  }
}

/**
 * With `syncReplicas`, fewer replicas than `count` acknowledged a write within `timeoutMs`
 * (`WAIT`, or `WAITAOF` when the master's AOF is on). From an acquire (of a lock, or of a
 * semaphore's permits) or a semaphore's drain: the grant was rolled back and the call ran out
 * of time to try again, so nothing is held. From the `error` event: a write that cannot be
 * undone (a release or hand-over, permits given to a semaphore, a latch's count set, counted
 * down or deleted) that was applied on the master but not confirmed on enough replicas.
 * Code `NOT_REPLICATED`.
 */
export class ReplicationError extends LockError {
  override readonly name = 'ReplicationError';
  /** Replicas that acknowledged the write in time. */
  readonly acknowledged: number;
  /** Replicas that had to (`syncReplicas.count`). */
  readonly required: number;
  constructor(message: string, acknowledged: number, required: number) {
    super('NOT_REPLICATED', message);
    this.acknowledged = acknowledged;
    this.required = required;
  }
}
