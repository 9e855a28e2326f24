import { Writes } from '../../engine/index.js';
import type { ConditionCall, Engine } from '../../engine/index.js';
import { lockKey, semaphoreChannel } from '../../keys.js';
import type { SemaphoreOptions } from '../../options.js';
import { PermitCounter, runThenRelease } from './counter.js';
import {
  checkAcquireArgs,
  checkPermitChange,
  checkPermits,
  checkSemaphoreOptions,
  checkWithPermitsArgs,
  type CheckedPermitAcquire,
  type SemaphoreAcquireOptions,
} from './options.js';
import type { SemaphoreTarget } from './protocol.js';
import { KIND } from './permit-wait.js';
import { PermitTaking } from './taking.js';

/**
 * A counting semaphore stored as Redisson's RSemaphore stores it: a string counter `<key>` of
 * free permits, no owner and no TTL, its new count published on `redisson_sc:{<key>}` by every
 * release, so a Node service on latchkey and a Java service on Redisson share one semaphore.
 * Get one from {@link LockClient.semaphore}.
 *
 * Permits have no owner: any process may release them, and one that dies holding permits never
 * gives them back (the counter stays low until someone calls {@link Semaphore.addPermits}). For
 * permits that come back by themselves when their holder dies, use
 * {@link LockClient.permitSemaphore}, whose permits have leases the watchdog renews.
 *
 * The counter is the semaphore's state and has no TTL, as Redisson's: it stays until
 * {@link Semaphore.delete}. A missing counter holds 0 permits, unless the semaphore was made
 * with `permits`: then the first call that needs it creates it with that count.
 *
 * Waiting: a release publishes the new count and wakes as many of each client's waiters as the
 * count can serve; waiters do not poll. Not fair: a waiter that asks for many permits may be
 * passed by smaller requests arriving later, for as long as they keep coming (as in Redisson).
 *
 * @example
 * ```ts
 * const exports = locks.semaphore('exports', { permits: 3 });
 * await exports.withPermits(1, async () => {
 *   await runExport(job);
 * });
 * ```
 */
export class Semaphore {
  readonly #target: SemaphoreTarget;
  readonly #initial: number | undefined;
  readonly #takes: PermitTaking;
  readonly #counter: PermitCounter;

  /** @internal Use {@link LockClient.semaphore}. */
  constructor(engine: Engine, keyPrefix: string, name: string, options: SemaphoreOptions | undefined) {
    this.#initial = checkSemaphoreOptions(options);
    const key = lockKey(keyPrefix, name);
    this.#target = {
      name,
      key,
      channel: semaphoreChannel(key),
      initial: this.#initial === undefined ? '' : String(this.#initial),
    };
    // What its calls are reported as to OpenTelemetry.
    const report: ConditionCall = { kind: KIND, name };
    const writes = new Writes(engine, key);
    this.#counter = new PermitCounter(engine, this.#target, writes, report);
    this.#takes = new PermitTaking(engine, this.#target, writes, this.#counter, report);
  }

  /** The semaphore's name. */
  get name(): string {
    return this.#target.name;
  }

  /** The semaphore's Redis key (`keyPrefix + name`): a string counter of free permits. */
  get key(): string {
    return this.#target.key;
  }

  /** The count a missing counter is created with (the `permits` option), if any. */
  get initialPermits(): number | undefined {
    return this.#initial;
  }

  /**
   * Takes `permits` permits (default 1), waiting up to `waitMs` (default: forever) until that
   * many are free. Waiting is driven by the releases' messages, not by polling. While Redis
   * cannot be reached (frozen, restarting, failing over) it keeps trying until `waitMs` runs out;
   * a try whose reply was lost is given up in Redis before the next, so it takes its permits once
   * or not at all.
   *
   * @throws {@link LockTimeoutError} when `waitMs` runs out; a {@link LockError} `REDIS_ERROR`
   *   when it runs out while Redis cannot be reached; {@link ReplicationError} when, with
   *   `syncReplicas`, `waitMs` runs out on a grant too few replicas acknowledged (it was given
   *   back); `signal.reason` when aborted (no permit is taken in any of these cases);
   *   {@link InvalidArgumentError} for bad input, before any Redis command.
   * @example
   * ```ts
   * await semaphore.acquire();                    // one permit, waits as long as it takes
   * await semaphore.acquire(3, { waitMs: 2_000 }); // three permits, or LockTimeoutError
   * await semaphore.acquire({ signal });           // one permit, until `signal` aborts
   * ```
   */
  acquire(options?: SemaphoreAcquireOptions): Promise<void>;
  acquire(permits?: number, options?: SemaphoreAcquireOptions): Promise<void>;
  acquire(first?: number | SemaphoreAcquireOptions, second?: SemaphoreAcquireOptions): Promise<void> {
    let checked: CheckedPermitAcquire;
    try {
      checked = checkAcquireArgs(first, second, Number.POSITIVE_INFINITY);
    } catch (error) {
      return Promise.reject(error);
    }
    // The wait's own promise, with no async function around it: a waiting acquire keeps no
    // suspended function of latchkey's.
    return this.#takes.take(checked.permits, checked.waitMs, checked.signal);
  }

  /**
   * Takes `permits` permits (default 1) if that many are free, waiting up to `waitMs` (default
   * 0: not at all). Resolves whether it took them.
   *
   * @throws {@link ReplicationError} when, with `syncReplicas`, `waitMs` runs out on a grant too
   *   few replicas acknowledged (it was given back); `signal.reason` when aborted;
   *   {@link InvalidArgumentError} for bad input, before any Redis command.
   * @example
   * ```ts
   * if (await semaphore.tryAcquire()) {
   *   try {
   *     await refreshThumbnail(photo);
   *   } finally {
   *     await semaphore.release();
   *   }
   * }
   * const gotTwo = await semaphore.tryAcquire(2, { waitMs: 500 });
   * ```
   */
  tryAcquire(options?: SemaphoreAcquireOptions): Promise<boolean>;
  tryAcquire(permits?: number, options?: SemaphoreAcquireOptions): Promise<boolean>;
  tryAcquire(first?: number | SemaphoreAcquireOptions, second?: SemaphoreAcquireOptions): Promise<boolean> {
    let checked: CheckedPermitAcquire;
    try {
      checked = checkAcquireArgs(first, second, 0);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#takes.tryTake(checked.permits, checked.waitMs, checked.signal);
  }

  /**
   * Gives `permits` permits (default 1) back and wakes waiters that can use them, here and in
   * every other client (Redisson's too). Any process may release: permits have no owner, and
   * nothing checks that the caller took them. A release whose reply is lost is retried and adds
   * its permits once.
   *
   * @throws {@link InvalidArgumentError} for bad input, before any Redis command.
   * @example
   * ```ts
   * await semaphore.acquire(2);
   * try {
   *   await resizeImages(batch);
   * } finally {
   *   await semaphore.release(2);
   * }
   * ```
   */
  async release(permits = 1): Promise<void> {
    checkPermits('permits', permits, 1);
    await this.#counter.release(permits);
  }

  /**
   * Takes `permits` permits (default 1), runs `fn`, and gives them back however `fn` ends.
   * Resolves with what `fn` resolves with.
   *
   * @throws {@link LockTimeoutError} when `waitMs` (default: forever) runs out before `fn` runs;
   *   {@link ReplicationError} as {@link Semaphore.acquire}; `signal.reason` when aborted; whatever `fn` throws; {@link InvalidArgumentError} for bad
   *   input, before any Redis command.
   * @example
   * ```ts
   * const report = await locks.semaphore('pdf-renderers', { permits: 4 }).withPermits(async () => {
   *   return renderInvoicePdf(invoice);
   * });
   * await uploads.withPermits(2, () => uploadArchive(archive), { waitMs: 30_000 });
   * ```
   */
  withPermits<T>(fn: () => T | PromiseLike<T>, options?: SemaphoreAcquireOptions): Promise<Awaited<T>>;
  withPermits<T>(
    permits: number,
    fn: () => T | PromiseLike<T>,
    options?: SemaphoreAcquireOptions,
  ): Promise<Awaited<T>>;
  async withPermits<T>(
    first: number | (() => T | PromiseLike<T>),
    second?: (() => T | PromiseLike<T>) | SemaphoreAcquireOptions,
    third?: SemaphoreAcquireOptions,
  ): Promise<Awaited<T>> {
    const { permits, fn, waitMs, signal } = checkWithPermitsArgs(first, second, third);
    await this.#takes.take(permits, waitMs, signal);
    return runThenRelease(fn, () => this.release(permits));
  }

  /**
   * Sets the count of free permits to `permits` if the semaphore has no counter yet, and wakes
   * waiters. Resolves whether it set it. As Redisson's `trySetPermits`: the counter has no TTL.
   *
   * @throws {@link InvalidArgumentError} for bad input, before any Redis command.
   * @example
   * ```ts
   * await locks.semaphore('smtp-connections').trySetPermits(10);
   * ```
   */
  async trySetPermits(permits: number): Promise<boolean> {
    return await this.#counter.trySet(checkPermits('permits', permits, 0));
  }

  /**
   * Adds `permits` free permits (a negative number takes them away, and the count may go below
   * zero: acquires then wait until releases bring it above), creating the counter when it is
   * missing, and wakes waiters. As Redisson's `addPermits`.
   *
   * @throws {@link InvalidArgumentError} for bad input, before any Redis command.
   * @example
   * ```ts
   * await semaphore.addPermits(5);  // scale up
   * await semaphore.addPermits(-2); // scale down: two fewer permits once they are released
   * ```
   */
  async addPermits(permits: number): Promise<void> {
    await this.#counter.add(checkPermitChange(permits), `adding permits to semaphore "${this.name}"`);
  }

  /**
   * The number of free permits now (it may have changed by the time the promise resolves; it
   * may be negative after {@link Semaphore.addPermits} with a negative number). With the
   * `permits` option, a missing counter is created first; without it, a missing counter reads 0.
   *
   * @example
   * ```ts
   * metrics.gauge('exports.free', await semaphore.availablePermits());
   * ```
   */
  availablePermits(): Promise<number> {
    return this.#counter.available();
  }

  /**
   * Takes every free permit and resolves how many it took (0 when none was free). Give them back
   * with {@link Semaphore.release} like permits taken by `acquire`.
   *
   * @throws {@link ReplicationError} when, with `syncReplicas`, too few replicas acknowledged the
   *   drain: the permits were given back (no retry).
   *
   * @example
   * ```ts
   * const taken = await semaphore.drainPermits(); // maintenance: nobody else gets in
   * try {
   *   await migrateStorage();
   * } finally {
   *   if (taken > 0) await semaphore.release(taken);
   * }
   * ```
   */
  drainPermits(): Promise<number> {
    return this.#takes.drain();
  }

  /**
   * Deletes the counter. Resolves whether it existed. Waiters are not woken: with a `permits`
   * option their next try creates the counter anew, and a release creates it with the permits
   * released (as Redisson's release does).
   *
   * @example
   * ```ts
   * await locks.semaphore('campaign:2024-spring').delete();
   * ```
   */
  delete(): Promise<boolean> {
    return this.#counter.delete();
  }
}
