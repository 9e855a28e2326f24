import { EventEmitter } from 'eventemitter3';
import { checkClient, checkClientOptions, checkReentrant } from './client-options.js';
import { Engine } from './engine/index.js';
import { lockKey } from './keys.js';
import type {
  FairLockOptions,
  FencedLockOptions,
  LockClientEvents,
  LockClientOptions,
  LockOptions,
  PermitSemaphoreOptions,
  SemaphoreOptions,
} from './options.js';
import { CountDownLatch } from './primitives/count-down-latch/count-down-latch.js';
import { FairLock } from './primitives/fair-lock/fair-lock.js';
import { FencedLock } from './primitives/lock/fenced-lock.js';
import { Lock } from './primitives/lock/lock.js';
import { MultiLock, type LeasesOf, type MemberHandle } from './primitives/multi-lock/multi-lock.js';
import { PermitSemaphore } from './primitives/permit-semaphore/permit-semaphore.js';
import { ReadWriteLock } from './primitives/read-write-lock/read-write-lock.js';
import { Semaphore } from './primitives/semaphore/semaphore.js';
import { SimpleLock } from './primitives/simple-lock/simple-lock.js';
import type { LockRedisClient } from './redis/connection.js';
import { checkKey, checkText, MAX_NAME_LENGTH } from './validate.js';

/**
 * Entry point of latchkey: owns a client id, the watchdog that renews held locks, and one
 * subscriber connection for unlock notifications, shared by every kind of lock it hands out.
 * Pass it your connected node-redis or ioredis client; latchkey never closes that client.
 *
 * @example
 * ```ts
 * import { createClient } from 'redis';
 * import { LockClient } from 'latchkey';
 *
 * const redis = await createClient({ url: 'redis://localhost:6379' }).connect();
 * const locks = new LockClient(redis);
 * await locks.lock('invoice:42').withLock(async () => {
 *   await issueInvoice(42);
 * });
 * await locks.close();
 * ```
 */
export class LockClient extends EventEmitter<LockClientEvents> {
  readonly #engine: Engine;
  readonly #keyPrefix: string;

  /**
   * @param redis - a connected client: node-redis (`createClient(...).connect()`, a Redis
   *   Cluster's `createCluster(...).connect()` or `createSentinel(...).connect()`, v5 or later)
   *   or ioredis (`new Redis(...)`, standalone, with or without `sentinels`, v5 or later; one
   *   still connecting is fine).
   * @param options - see {@link LockClientOptions}; all optional.
   * @throws {@link InvalidArgumentError} for a value that is not such a client (an ioredis
   *   Cluster client, a client not connected or closed) or an option that is unknown or out of range.
   */
  constructor(redis: LockRedisClient, options?: LockClientOptions) {
    super();
    const client = checkClient(redis);
    const settings = checkClientOptions(options);
    this.#keyPrefix = settings.keyPrefix;
    this.#engine = new Engine(client, this, settings);
  }

  /**
   * A handle on the reentrant lock `name` (key `keyPrefix + name`). Sends nothing to Redis.
   *
   * @param name - 1 to 1,024 characters, not only white space, no control characters, well-formed
   *   Unicode; braces only as one non-empty `{hash tag}`.
   * @throws {@link InvalidArgumentError} for a bad name or option.
   * @example
   * ```ts
   * const lock = locks.lock('invoice:42');
   * const strict = locks.lock('report:daily', { reentrant: false });
   * ```
   */
  lock(name: string, options?: LockOptions): Lock {
    const checked = this.#checkName(name);
    return new Lock(this.#engine, this.#keyPrefix, checked, checkReentrant(options));
  }

  /**
   * A handle on the fenced lock `name`: a reentrant lock whose leases carry a fencing token.
   * Sends nothing to Redis. Same name rules as {@link LockClient.lock}.
   *
   * @throws {@link InvalidArgumentError} for a bad name or option.
   * @example
   * ```ts
   * const lease = await locks.fencedLock('ledger:7').acquire();
   * await ledger.append(entry, { fencingToken: lease.token });
   * await lease.release();
   * ```
   */
  fencedLock(name: string, options?: FencedLockOptions): FencedLock {
    const checked = this.#checkName(name);
    return new FencedLock(this.#engine, this.#keyPrefix, checked, checkReentrant(options));
  }

  /**
   * A handle on the simple token lock `name` (`SET NX PX`, the layout of redis-py's `Lock` and
   * node-redlock). Not reentrant. Sends nothing to Redis. Same name rules as
   * {@link LockClient.lock}.
   *
   * @throws {@link InvalidArgumentError} for a bad name.
   * @example
   * ```ts
   * await locks.simpleLock('reports:nightly').withLock(() => buildNightlyReport());
   * ```
   */
  simpleLock(name: string): SimpleLock {
    const checked = this.#checkName(name);
    return new SimpleLock(this.#engine, this.#keyPrefix, checked);
  }

  /**
   * A handle on the fair lock `name`: reentrant by default, granted in the order its waiters
   * asked, across processes. Sends nothing to Redis. Same name rules as {@link LockClient.lock};
   * options: `reentrant` and `waiterTimeoutMs` (see {@link FairLockOptions}).
   *
   * @throws {@link InvalidArgumentError} for a bad name or option.
   * @example
   * ```ts
   * const settlements = locks.fairLock('settlements:eu');
   * await settlements.withLock(() => settleNextBatch());
   * ```
   */
  fairLock(name: string, options?: FairLockOptions): FairLock {
    const checked = this.#checkName(name);
    return new FairLock(this.#engine, this.#keyPrefix, checked, options);
  }

  /**
   * A handle on the read-write lock `name`: many readers or one writer. Sends nothing to Redis.
   * Same name rules as {@link LockClient.lock}.
   *
   * @throws {@link InvalidArgumentError} for a bad name.
   */
  readWriteLock(name: string): ReadWriteLock {
    const checked = this.#checkName(name);
    return new ReadWriteLock(this.#engine, this.#keyPrefix, checked);
  }

  /**
   * A handle on the counting semaphore `name`. Sends nothing to Redis. Same name rules as
   * {@link LockClient.lock}.
   *
   * @throws {@link InvalidArgumentError} for a bad name or option.
   */
  semaphore(name: string, options?: SemaphoreOptions): Semaphore {
    const checked = this.#checkName(name);
    return new Semaphore(this.#engine, this.#keyPrefix, checked, options);
  }

  /**
   * A handle on the permit semaphore `name`: permits identified by id, each with a lease that
   * the watchdog renews while its holder lives. Sends nothing to Redis. Same name rules as
   * {@link LockClient.lock}.
   *
   * @throws {@link InvalidArgumentError} for a bad name or option.
   */
  permitSemaphore(name: string, options?: PermitSemaphoreOptions): PermitSemaphore {
    const checked = this.#checkName(name);
    return new PermitSemaphore(this.#engine, this.#keyPrefix, checked, options);
  }

  /**
   * A handle on the count-down latch `name`. Sends nothing to Redis. Same name rules as
   * {@link LockClient.lock}.
   *
   * @throws {@link InvalidArgumentError} for a bad name.
   */
  countDownLatch(name: string): CountDownLatch {
    const checked = this.#checkName(name);
    return new CountDownLatch(this.#engine, this.#keyPrefix, checked);
  }

  /** A {@link MultiLock}: `handles` (of this client, one per key) taken all or nothing. Sends nothing. */
  multiLock<const H extends readonly MemberHandle[]>(handles: H): MultiLock<LeasesOf<H>> {
    return new MultiLock(this.#engine, handles);
  }

  /** Whether {@link LockClient.close} was called. */
  get closed(): boolean {
    return this.#engine.closed;
  }

  /**
   * Stops the watchdog and closes the subscriber connection this client opened. Waiting
   * acquisitions reject with {@link ClientClosedError}; locks still held are released (one
   * attempt each) and their leases' signals abort with a {@link LockLostError} (reason
   * `client-closed`). The client you passed in stays open.
   */
  close(): Promise<void> {
    return this.#engine.close();
  }

  /** Same as {@link LockClient.close}, for `await using locks = new LockClient(redis)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #checkName(name: string): string {
    const checked = checkText('name', name, MAX_NAME_LENGTH, false);
    checkKey(checked, lockKey(this.#keyPrefix, checked));
    return checked;
  }
}
