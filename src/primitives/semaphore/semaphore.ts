import { checkCallback, Writes } from '../../engine/index.js';
import type { ConditionCall, Engine } from '../../engine/index.js';
import { InvalidArgumentError, LockTimeoutError } from '../../errors.js';
import { lockKey, semaphoreChannel } from '../../keys.js';
import type { SemaphoreOptions } from '../../options.js';
import { checkOptions, describe } from '../../validate.js';
import {
  checkAcquireOptions,
  checkPermits,
  MAX_PERMITS,
  permitsAndOptions,
  type SemaphoreAcquireOptions,
} from './options.js';
import { addCall, availableCall, deleteCall, trySetCall, type SemaphoreTarget } from './protocol.js';
import { integerOf, KIND, PermitTaking } from './taking.js';

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
  readonly #engine: Engine;
  readonly #target: SemaphoreTarget;
  readonly #initial: number | undefined;
  readonly #writes: Writes;
  readonly #takes: PermitTaking;
  /** What its calls are reported as to OpenTelemetry. */
  readonly #report: ConditionCall;

  /** @internal Use {@link LockClient.semaphore}. */
  constructor(engine: Engine, keyPrefix: string, name: string, options: SemaphoreOptions | undefined) {
    const checked = checkOptions('options', options, ['permits'] as const);
    this.#initial = checked.permits === undefined ? undefined : checkPermits('permits', checked.permits, 0);
    this.#engine = engine;
    const key = lockKey(keyPrefix, name);
    this.#target = {
      name,
      key,
      channel: semaphoreChannel(key),
      initial: this.#initial === undefined ? '' : String(this.#initial),
    };
    this.#report = { kind: KIND, name };
    this.#writes = new Writes(engine, key);
    this.#takes = new PermitTaking(engine, this.#target, this.#writes, (permits) => this.#giveBack(permits));
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
  async acquire(first?: number | SemaphoreAcquireOptions, second?: SemaphoreAcquireOptions): Promise<void> {
    const [permits, raw] = permitsAndOptions(first, second);
    const { waitMs, signal } = checkAcquireOptions(raw, Number.POSITIVE_INFINITY);
    if (await this.#acquire(permits, waitMs, signal)) return;
    throw new LockTimeoutError(
      `Timed out waiting for ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.name}"`,
    );
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
  async tryAcquire(
    first?: number | SemaphoreAcquireOptions,
    second?: SemaphoreAcquireOptions,
  ): Promise<boolean> {
    const [permits, raw] = permitsAndOptions(first, second);
    const { waitMs, signal } = checkAcquireOptions(raw, 0);
    return this.#acquire(permits, waitMs, signal);
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
    await this.#engine.conditionTelemetry.release(this.#report, permits, async () => {
      await this.#add(
        permits,
        `releasing ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.name}"`,
      );
    });
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
    const [permits, fn, raw] =
      typeof first === 'function' ? [1, first, second] : [checkPermits('permits', first, 1), second, third];
    checkCallback(fn);
    const { waitMs, signal } = checkAcquireOptions(raw, Number.POSITIVE_INFINITY);
    if (!(await this.#acquire(permits, waitMs, signal))) {
      throw new LockTimeoutError(
        `Timed out waiting for ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.name}"`,
      );
    }
    let failed = false;
    try {
      return await fn();
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      try {
        await this.release(permits);
      } catch (error) {
        // The callback's own error says more than a failed release after it.
        if (!failed) throw error; // eslint-disable-line no-unsafe-finally
      }
    }
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
    checkPermits('permits', permits, 0);
    const reply = await this.#writes.giving(
      (requestKey, recordTtlMs) => trySetCall(this.#target, requestKey, permits, recordTtlMs),
      `setting the permits of semaphore "${this.name}"`,
      (written) => written === 1 && `The permits of semaphore "${this.name}" were set`,
    );
    return reply === 1;
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
    if (typeof permits !== 'number' || !Number.isInteger(permits) || Math.abs(permits) > MAX_PERMITS) {
      throw new InvalidArgumentError(
        `Expected \`permits\` to be a whole number from -${MAX_PERMITS} to ${MAX_PERMITS}, got ${describe(permits)}`,
      );
    }
    await this.#add(permits, `adding permits to semaphore "${this.name}"`);
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
  async availablePermits(): Promise<number> {
    const reply = await this.#engine.call(
      availableCall(this.#target),
      `reading the permits of semaphore "${this.name}"`,
    );
    return integerOf(reply, this.name);
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
  async delete(): Promise<boolean> {
    // Cannot be undone either: a shortfall is reported, as for the permits given.
    const reply = await this.#writes.repeatable(
      deleteCall(this.#target),
      `deleting semaphore "${this.name}"`,
      (written) => Number(written) === 1 && `Semaphore "${this.name}" was deleted`,
    );
    return Number(reply) === 1;
  }

  async #add(permits: number, doing: string): Promise<number> {
    const reply = await this.#writes.giving(
      (requestKey, recordTtlMs) => addCall(this.#target, requestKey, permits, recordTtlMs),
      doing,
      () =>
        `${permits} permit${Math.abs(permits) === 1 ? ' was' : 's were'} added to semaphore "${this.name}"`,
    );
    return integerOf(reply, this.name);
  }

  /** Takes `permits`, waiting up to `waitMs`: resolves whether it took them. Reported as a call. */
  #acquire(permits: number, waitMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    return this.#engine.conditionTelemetry.acquire(this.#report, permits, waitMs, signal, () =>
      this.#takes.wait(permits, waitMs, signal),
    );
  }

  /** Gives back permits an attempt took after its caller stopped waiting. */
  #giveBack(permits: number): Promise<unknown> {
    if (this.#engine.closed) return Promise.resolve();
    return this.#add(
      permits,
      `giving back ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.name}"`,
    );
  }
}
