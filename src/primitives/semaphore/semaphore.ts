import { checkCallback, Writes } from '../../engine/index.js';
import type { ConditionCall, ConditionTry, Engine, ScriptCall, Synced } from '../../engine/index.js';
import { InvalidArgumentError, LockError, LockTimeoutError, type ReplicationError } from '../../errors.js';
import { lockKey, semaphoreChannel } from '../../keys.js';
import type { SemaphoreOptions } from '../../options.js';
import { checkOptions, checkSignal, checkWait, describe } from '../../validate.js';
import {
  acquireCall,
  acquireReply,
  addCall,
  availableCall,
  cancelAcquireCall,
  cancelDrainCall,
  deleteCall,
  drainCall,
  integerReply,
  permitWakes,
  trySetCall,
  type AcquireReply,
  type SemaphoreTarget,
} from './protocol.js';

/** The kind, as telemetry names it. */
const KIND = 'semaphore';

/** The most permits one call takes, gives or sets: Redisson counts permits in a Java `int`. */
const MAX_PERMITS = 2_147_483_647;

/**
 * How long a given-up acquire's request key refuses late copies, in milliseconds, and how long
 * the cancel is retried (half of it) while Redis does not answer.
 */
const CANCEL_RECORD_TTL_MS = 60_000;

/**
 * With `syncReplicas`, how long an acquire pauses before it tries again after a grant too few
 * replicas acknowledged (doubled each time, up to the maximum), as a lock's acquire does.
 */
const UNREPLICATED_RETRY_MIN_MS = 50;
const UNREPLICATED_RETRY_MAX_MS = 1_000;

/** An attempt whose grant too few replicas acknowledged, and that was given back. */
interface Unreplicated {
  readonly status: 'unreplicated';
  readonly error: ReplicationError;
}

/**
 * Options of {@link Semaphore.acquire}, {@link Semaphore.tryAcquire} and
 * {@link Semaphore.withPermits}.
 *
 * @example
 * ```ts
 * await semaphore.acquire(2, { waitMs: 5_000, signal: AbortSignal.timeout(10_000) });
 * ```
 */
export interface SemaphoreAcquireOptions {
  /**
   * How long to wait for enough free permits, in milliseconds; `Infinity` waits until they are
   * free. A whole number from 0 to 2147483647.
   * @defaultValue `Infinity` for `acquire` and `withPermits`, `0` for `tryAcquire`
   */
  readonly waitMs?: number;
  /** Stops waiting: the call rejects with `signal.reason` and takes no permit. */
  readonly signal?: AbortSignal;
}

/** What an attempt took. */
interface Taken {
  readonly permits: number;
}

function checkPermits(what: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_PERMITS) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be a whole number from ${min} to ${MAX_PERMITS}, got ${describe(value)}`,
    );
  }
  return value;
}

function checkAcquireOptions(
  value: unknown,
  defaultWaitMs: number,
): { waitMs: number; signal: AbortSignal | undefined } {
  const options = checkOptions('options', value, ['waitMs', 'signal'] as const);
  return {
    waitMs: options.waitMs === undefined ? defaultWaitMs : checkWait('waitMs', options.waitMs),
    signal: checkSignal('signal', options.signal),
  };
}

/** `(permits?, options?)` or `(options?)`: the permits (default 1) and the raw options. */
function permitsAndOptions(first: unknown, second: unknown): [number, unknown] {
  if (typeof first === 'object' && first !== null && second === undefined) return [1, first];
  return [first === undefined ? 1 : checkPermits('permits', first, 1), second];
}

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
    return this.#integer(reply);
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
  async drainPermits(): Promise<number> {
    const requestKey = this.#writes.requestKey();
    const { reply, acknowledged } = await this.#writes.recorded(
      (request, recordTtlMs) => drainCall(this.#target, request, recordTtlMs),
      `draining the permits of semaphore "${this.name}"`,
      requestKey,
    );
    const taken = this.#integer(reply);
    const shortfall =
      taken > 0
        ? this.#engine.shortfall(
            acknowledged,
            `${taken} permit${taken === 1 ? ' was' : 's were'} drained from semaphore "${this.name}"`,
          )
        : undefined;
    if (shortfall !== undefined) {
      // Permits taken as an acquire takes them: a failover could hand them out again. Give them
      // back as an acquire's are (only if the drain's record says it took them, which the same
      // failover would lose with the drain), then fail: nothing is left taken.
      await this.#cancel(cancelDrainCall(this.#target, requestKey, CANCEL_RECORD_TTL_MS), 'drain');
      throw shortfall;
    }
    return taken;
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

  #integer(reply: unknown): number {
    const value = integerReply(reply);
    if (value === undefined) {
      throw new LockError('REDIS_ERROR', `Unexpected reply from a script of semaphore "${this.name}"`);
    }
    return value;
  }

  async #add(permits: number, doing: string): Promise<number> {
    const reply = await this.#writes.giving(
      (requestKey, recordTtlMs) => addCall(this.#target, requestKey, permits, recordTtlMs),
      doing,
      () =>
        `${permits} permit${Math.abs(permits) === 1 ? ' was' : 's were'} added to semaphore "${this.name}"`,
    );
    return this.#integer(reply);
  }

  /** Takes `permits`, waiting up to `waitMs`: resolves whether it took them. Reported as a call. */
  #acquire(permits: number, waitMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    return this.#engine.conditionTelemetry.acquire(this.#report, permits, waitMs, signal, () =>
      this.#wait(permits, waitMs, signal),
    );
  }

  async #wait(permits: number, waitMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    /** The last attempt's grant too few replicas acknowledged (it was given back). */
    let unreplicated: ReplicationError | undefined;
    let pauseMs = UNREPLICATED_RETRY_MIN_MS;
    const found = await this.#engine.waitFor<Taken>(
      {
        what: `semaphore "${this.name}"`,
        kind: KIND,
        channel: this.#target.channel,
        wakes: permitWakes,
        demand: permits,
        attempt: async (deadline): Promise<ConditionTry<Taken>> => {
          const reply = await this.#attempt(permits, deadline);
          if (reply.status === 'taken') return { done: true, value: { permits } };
          unreplicated = reply.status === 'unreplicated' ? reply.error : undefined;
          if (unreplicated !== undefined) {
            // The replicas lag or are gone: trying again at once would most likely fail the
            // same way. Pause (within the wait), then try again without waiting for a message.
            const pause = Math.min(pauseMs, deadline - performance.now());
            pauseMs = Math.min(UNREPLICATED_RETRY_MAX_MS, pauseMs * 2);
            if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause).unref());
            return { done: false, recheckMs: 0 };
          }
          // Every release publishes the new count, and so does a call that creates the counter
          // or sets it: only a message (or a reconnect) is worth another try.
          return { done: false, recheckMs: Number.POSITIVE_INFINITY };
        },
        undo: (value) => this.#giveBack(value.permits),
      },
      waitMs,
      signal,
    );
    // The wait ran out on a grant too few replicas acknowledged: say so, not "timed out".
    if (found === null && unreplicated !== undefined) throw unreplicated;
    return found !== null;
  }

  /**
   * One try, made idempotent by its request key; cancelled when its outcome stays unknown, and
   * with `syncReplicas` when too few replicas acknowledged its grant.
   */
  async #attempt(permits: number, deadline: number): Promise<AcquireReply | Unreplicated> {
    const engine = this.#engine;
    const requestKey = this.#writes.requestKey();
    const until = Math.min(deadline, performance.now() + this.#writes.retryMs);
    const cancel = cancelAcquireCall(this.#target, requestKey, permits, CANCEL_RECORD_TTL_MS);
    let synced: Synced;
    try {
      synced = await engine.syncedCall(
        acquireCall(this.#target, requestKey, permits, this.#writes.recordTtlMs),
        `acquiring ${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.name}"`,
        until,
      );
    } catch (error) {
      // The request may still have been applied, or a copy of it may yet be: refuse every copy
      // and give back what it took, before the caller hears of the failure (and before the wait
      // tries again with a fresh request while it lasts).
      await this.#cancel(cancel, 'acquire', deadline + engine.commandTimeoutMs);
      throw error;
    }
    const outcome = acquireReply(synced.reply);
    if (outcome?.status === 'taken') {
      const error = engine.shortfall(
        synced.acknowledged,
        `${permits} permit${permits === 1 ? '' : 's'} of semaphore "${this.name}" ${permits === 1 ? 'was' : 'were'} granted`,
      );
      if (error !== undefined) {
        // Too few replicas have the grant: a failover now could hand the same permits to
        // others. Give them back before the caller hears of it. The cancel gives back only
        // what the request's record says it took, and a failover that loses the grant loses
        // that record with it, so it never adds permits that were not taken.
        await this.#cancel(cancel, 'acquire', deadline + engine.commandTimeoutMs);
        return { status: 'unreplicated', error };
      }
    }
    if (outcome === undefined || outcome.status === 'cancelled') {
      // Only a request this client gave up on is refused, and request keys are never reused.
      throw new LockError(
        'REDIS_ERROR',
        `Unexpected reply from the acquire script of semaphore "${this.name}"`,
      );
    }
    return outcome;
  }

  /**
   * Cancels an acquire (or drain) request whose outcome is unknown or too few replicas
   * acknowledged: the caller waits for it a little (one retry window, and not past `until`,
   * monotonic ms); if Redis still does not answer, it goes on in the background until a late
   * copy of the request can no longer matter.
   */
  async #cancel(
    cancel: ScriptCall,
    what: 'acquire' | 'drain',
    until = Number.POSITIVE_INFINITY,
  ): Promise<void> {
    const engine = this.#engine;
    if (engine.closed) return;
    const giveUpAt = performance.now() + CANCEL_RECORD_TTL_MS / 2;
    const cancelling = engine
      .call(cancel, `cancelling an unconfirmed ${what} of semaphore "${this.name}"`, giveUpAt)
      .catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      cancelling,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, Math.min(this.#writes.retryMs, until - performance.now())));
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
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
