import type { LockLostError } from './errors.js';

/**
 * Options of a {@link LockClient}.
 *
 * @example
 * ```ts
 * const locks = new LockClient(redis, { keyPrefix: 'billing:', watchdogTimeoutMs: 30_000 });
 * ```
 */
export interface LockClientOptions {
  /**
   * Lease, in milliseconds, of a lock acquired without `leaseMs`. While the lock is held the
   * watchdog renews it every third of this, so a crashed holder's lock frees up within it.
   * A whole number from 30 to 2,147,483,647.
   * @defaultValue 30_000
   */
  readonly watchdogTimeoutMs?: number;
  /**
   * Prepended to every lock name to form its Redis key (`keyPrefix + name`). At most 256
   * characters; the whole key may hold at most one `{hash tag}`.
   * @defaultValue `''`
   */
  readonly keyPrefix?: string;
  /**
   * How long, in milliseconds, one Redis call may take before latchkey treats its outcome as
   * unknown and retries it (every call is safe to retry). A whole number from 1.
   * @defaultValue 5_000
   */
  readonly commandTimeoutMs?: number;
  /**
   * How long, in milliseconds, the subscription to a lock's unlock channel is kept after its
   * last local waiter leaves, so steady contention does not SUBSCRIBE and UNSUBSCRIBE over and
   * over. A whole number from 0.
   * @defaultValue 5_000
   */
  readonly subscriptionLingerMs?: number;
  /**
   * A lock the watchdog has kept for this long, in milliseconds, without a release gets a
   * `leaseHeldLong` event (once per acquisition) and, the first time on this client, a process
   * warning (`LATCHKEY_LONG_HOLD`): a lease that was never released is otherwise renewed for as
   * long as the process lives. `0` turns the check off. A whole number from 0.
   * @defaultValue 600_000 (10 minutes)
   */
  readonly longHoldWarningMs?: number;
  /**
   * Report spans and metrics to OpenTelemetry when `@opentelemetry/api` (an optional peer
   * dependency, 1.3 or later) is installed: an acquire and a release span per call, and the
   * `latchkey.*` metrics, through the API's global tracer and meter providers. Without the API
   * this does nothing. Register your MeterProvider before creating the client: the meter is
   * taken when the client is made. `false`: report nothing and never load the API.
   * @defaultValue true
   */
  readonly telemetry?: boolean;
  /**
   * Make every write of a lock, semaphore or latch wait for `count` replicas to acknowledge it
   * (`WAIT`, or `WAITAOF` when the master's AOF is on), sent right behind the write on the same
   * connection. A grant (of a lock, or of a semaphore's permits) acknowledged by fewer replicas
   * within `timeoutMs` is rolled back and tried again within the acquire's wait, else the
   * acquire rejects with a `ReplicationError`; a write that cannot be undone (a release, a
   * count-down) resolves and reports the shortfall on the `error` event. This makes
   * losing a grant in a failover unlikely, not impossible: WAIT is not consensus (see the
   * README's "Synchronous replicas"). Off by default.
   *
   * @example
   * ```ts
   * const locks = new LockClient(sentinel, { syncReplicas: { count: 1, timeoutMs: 200 } });
   * ```
   */
  readonly syncReplicas?: SyncReplicasOptions;
}

/** See {@link LockClientOptions.syncReplicas}. */
export interface SyncReplicasOptions {
  /** How many replicas must acknowledge each grant. A whole number from 1 to 100. */
  readonly count: number;
  /**
   * How long, in milliseconds, to wait for them. A whole number from 1 to a quarter of
   * `watchdogTimeoutMs`, so a renewal and its wait fit well within a third of the lease.
   */
  readonly timeoutMs: number;
}

/** Options of {@link LockClient.lock}. */
export interface LockOptions {
  /**
   * `true`: a lock held by an async context can be taken again from inside it (the hold count
   * goes up). `false`: taking it again from the context that holds it throws
   * {@link LockReentryError} instead of waiting for itself, and `withLock` callbacks running
   * side by side exclude each other.
   * @defaultValue true
   */
  readonly reentrant?: boolean;
}

/** Options of {@link LockClient.fencedLock}: the same as a lock's. */
export type FencedLockOptions = LockOptions;

/**
 * Options of {@link LockClient.fairLock}: a lock's, and how long a waiter keeps its place.
 *
 * @example
 * ```ts
 * const settlements = locks.fairLock('settlements:eu', { waiterTimeoutMs: 5_000 });
 * ```
 */
export interface FairLockOptions extends LockOptions {
  /**
   * How long, in milliseconds, a waiting owner keeps its place in the line after each time it
   * asks. latchkey asks again for it every third of this while it waits, so a live waiter never
   * loses its place; a waiter whose process died or froze is dropped once it heads the line with
   * its time run out, so it holds the line up for at most about this long plus one third of it
   * (while latchkey clients use the lock; Redisson's scripts alone drop it by its deadline in
   * wait steps, see `waitStepMs`).
   * Shorter: faster recovery from dead waiters, more calls per waiter. A whole number from 30 to
   * 2,147,483,647.
   * @defaultValue 10_000
   */
  readonly waiterTimeoutMs?: number;
  /**
   * Redisson's RFairLock threadWaitTime, in milliseconds: the step its arithmetic adds to a
   * waiter's deadline for each waiter ahead of it, and takes off every waiter's deadline when one
   * takes the lock or gives up. latchkey counts the line's deadlines the same way, so a line
   * shared with Redisson clients keeps its order. Set it to the Redisson clients'
   * `fairLockWaitTimeout` when they change it. (A Redisson `tryLock(waitTime, ...)` counts its
   * waitTime instead: a shorter step costs latchkey's waiters nothing, but such a Redisson waiter
   * can lose its place when a longer step is taken off, as among Redisson clients alone.) A whole
   * number from 1 to 2,147,483,647.
   * @defaultValue 300_000 (Redisson's default)
   */
  readonly waitStepMs?: number;
}

/** Options of {@link LockClient.semaphore}. */
export interface SemaphoreOptions {
  /**
   * The number of permits the semaphore starts with when its counter does not exist yet.
   */
  readonly permits?: number;
}

/**
 * Options of {@link LockClient.permitSemaphore}.
 *
 * @example
 * ```ts
 * const fetches = locks.permitSemaphore('crawl:shop.example.com', { permits: 3 });
 * ```
 */
export interface PermitSemaphoreOptions {
  /**
   * The number of permits the semaphore starts with when its counter does not exist yet: set by
   * the first call that finds it missing, and ignored once it exists (change it then with
   * `addPermits`). A whole number from 1 to 2147483647.
   * @defaultValue none: the semaphore has no permits until `trySetPermits` or `addPermits`
   */
  readonly permits?: number;
}

/**
 * Options of {@link Lock.acquire}, {@link Lock.tryAcquire} and {@link Lock.withLock}.
 *
 * @example
 * ```ts
 * const lease = await lock.acquire({ waitMs: 2_000, signal: AbortSignal.timeout(5_000) });
 * ```
 */
export interface AcquireOptions {
  /**
   * How long to wait, in milliseconds, while another owner holds the lock. `0` tries once.
   * @defaultValue `Infinity` for `acquire` and `withLock`, `0` for `tryAcquire`
   */
  readonly waitMs?: number;
  /**
   * A fixed lease in milliseconds: the lock expires this long after it is taken unless
   * released first, and the watchdog does not renew it. Leave it out to have the watchdog keep
   * the lock for as long as it is held. A whole number from 1.
   * @defaultValue none: the watchdog renews the lock
   */
  readonly leaseMs?: number;
  /** Aborting it stops a waiting acquire; the promise rejects with `signal.reason`. */
  readonly signal?: AbortSignal;
}

/** What `acquired` events carry. */
export interface AcquiredEvent {
  /** The lock's name, as given to {@link LockClient.lock}. */
  readonly name: string;
  /** The lock's Redis key (`keyPrefix + name`). */
  readonly key: string;
  /** The hold count after this acquisition: 1 for a first acquisition, more for a re-entry. */
  readonly holdCount: number;
  /** Milliseconds from the call to the acquisition. */
  readonly waitedMs: number;
}

/** What `released` events carry. */
export interface ReleasedEvent {
  readonly name: string;
  readonly key: string;
  /** Holds left after this release; 0 when the lock was freed. */
  readonly holdCount: number;
}

/** What `lockLost` events carry. */
export interface LockLostEvent {
  readonly name: string;
  readonly key: string;
  /** The same error `lease.signal` aborted with. */
  readonly error: LockLostError;
}

/** What `leaseHeldLong` events carry: a lock kept by the watchdog for a long time. */
export interface LeaseHeldLongEvent {
  readonly name: string;
  readonly key: string;
  /** Milliseconds since the lock was taken. */
  readonly heldMs: number;
}

/** What `renewFailed` events carry: a renewal call failed and will be retried. */
export interface RenewFailedEvent {
  /** Names of the locks the failed call was renewing. */
  readonly names: readonly string[];
  readonly error: Error;
  /** Milliseconds until the next attempt. */
  readonly retryInMs: number;
}

/**
 * What `redisUnreachable` events carry: nothing this client sent has been answered for at least
 * `commandTimeoutMs`.
 */
export interface RedisUnreachableEvent {
  /**
   * The lock (semaphore, latch) whose call was going unanswered when this was reported, as given
   * to the client; absent when it was no such call (the subscriber connection, a server check).
   */
  readonly name?: string;
  /** Its Redis key (`keyPrefix + name`); present with `name`. */
  readonly key?: string;
  /**
   * Milliseconds since the first call that went unanswered was sent (or the subscriber connection
   * failed), with no answer since.
   */
  readonly downForMs: number;
  /** The latest failure: a timeout, a lost or refused connection, a `LOADING` or `READONLY` reply. */
  readonly error: Error;
}

/** What `redisReachable` events carry: Redis answered again after a `redisUnreachable`. */
export interface RedisReachableEvent {
  /** Milliseconds from the first unanswered call to this answer. */
  readonly downForMs: number;
}

/** Events of a {@link LockClient}; listen with `locks.on(name, listener)`. */
export interface LockClientEvents {
  acquired: (event: AcquiredEvent) => void;
  released: (event: ReleasedEvent) => void;
  lockLost: (event: LockLostEvent) => void;
  renewFailed: (event: RenewFailedEvent) => void;
  /** A lock was kept longer than `longHoldWarningMs` without a release. */
  leaseHeldLong: (event: LeaseHeldLongEvent) => void;
  /**
   * Redis has not answered this client for `commandTimeoutMs` (it is down, unreachable, frozen or
   * failing over); once per outage. Calls go on as before: acquires keep trying within their
   * `waitMs`. The first one on a client also raises a process warning `LATCHKEY_REDIS_UNREACHABLE`.
   */
  redisUnreachable: (event: RedisUnreachableEvent) => void;
  /** Redis answered again after a `redisUnreachable`. */
  redisReachable: (event: RedisReachableEvent) => void;
  /** Background failures that no caller is waiting for (the subscriber, cleanups, listeners). */
  error: (error: Error) => void;
}
