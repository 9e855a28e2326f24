import { Writes } from '../../engine/index.js';
import type { ConditionCall, Engine } from '../../engine/index.js';
import { InvalidArgumentError, LockError } from '../../errors.js';
import { latchChannel, lockKey } from '../../keys.js';
import { checkDuration, checkOptions, checkSignal, checkWait, describe } from '../../validate.js';
import { KIND, LatchOpening } from './opening.js';
import { LATCH_PROTOCOL, parseCount, type LatchTarget } from './protocol.js';

/** Redis's counters are 64-bit; a count must also survive the trip through a JS number. */
const MAX_COUNT = Number.MAX_SAFE_INTEGER;

const SET_OPTIONS = ['ttlMs'] as const;
const AWAIT_OPTIONS = ['waitMs', 'signal'] as const;

/**
 * Options of {@link CountDownLatch.trySetCount}.
 *
 * @example
 * ```ts
 * await latch.trySetCount(3, { ttlMs: 10 * 60_000 });
 * ```
 */
export interface LatchSetOptions {
  /**
   * A lifetime for the latch key, in milliseconds (whole number >= 1): a latch abandoned before
   * it reaches zero is gone after that, which opens it for everyone waiting (its count reads 0).
   * Count-downs keep the lifetime set here.
   * @defaultValue none: the key lives until the count reaches zero, as Redisson's does
   */
  readonly ttlMs?: number;
}

/**
 * Options of {@link CountDownLatch.await}.
 *
 * @example
 * ```ts
 * const opened = await latch.await({ waitMs: 30_000, signal: AbortSignal.timeout(60_000) });
 * ```
 */
export interface LatchAwaitOptions {
  /**
   * How long to wait for the count to reach zero, in milliseconds (whole number >= 0, or
   * `Infinity`). 0: look once.
   * @defaultValue `Infinity`
   */
  readonly waitMs?: number;
  /** Aborts the wait: `await` rejects with `signal.reason`. */
  readonly signal?: AbortSignal;
}

function checkCount(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_COUNT) {
    throw new InvalidArgumentError(
      `Expected \`count\` to be a whole number from 1 to ${MAX_COUNT}, got ${describe(value)}`,
    );
  }
  return value;
}

/**
 * A distributed count-down latch, as Java's `CountDownLatch` and Redisson's `RCountDownLatch`:
 * a count set once, counted down by any process, and awaited by any number of processes until
 * it reaches zero. Get one from {@link LockClient.countDownLatch}.
 *
 * Layout (Redisson's, shared with Java services on Redisson): a string counter `<key>`; changes
 * announced on `redisson_countdownlatch__channel__{<key>}`, `0` when it reaches zero and `1`
 * when a count is set. A latch whose key does not exist has a count of 0: it is open.
 *
 * Waiting is woken by that channel, not by polling; a latch set with a `ttlMs` is also re-read
 * when its key is due to expire, since an expiry announces nothing.
 *
 * @example
 * ```ts
 * const ready = locks.countDownLatch('cache-warmup');
 * await ready.trySetCount(3);
 * // in each of three warming workers:
 * await ready.countDown();
 * // in the service that must wait for them:
 * if (!(await ready.await({ waitMs: 60_000 }))) throw new Error('cache not warm in time');
 * ```
 */
export class CountDownLatch {
  readonly #engine: Engine;
  readonly #name: string;
  readonly #target: LatchTarget;
  readonly #writes: Writes;
  /** What its calls are reported as to OpenTelemetry. */
  readonly #report: ConditionCall;
  /** What its awaits wait for, made with the first. */
  #opening: LatchOpening | undefined;

  /** @internal Use {@link LockClient.countDownLatch}. */
  constructor(engine: Engine, keyPrefix: string, name: string) {
    this.#engine = engine;
    this.#name = name;
    this.#report = { kind: KIND, name };
    const key = lockKey(keyPrefix, name);
    this.#target = { key, channel: latchChannel(key, engine.cluster) };
    this.#writes = new Writes(engine, key);
  }

  /** The latch's name. */
  get name(): string {
    return this.#name;
  }

  /** The latch's Redis key (`keyPrefix + name`). */
  get key(): string {
    return this.#target.key;
  }

  /**
   * Sets the count, only if no latch exists (none was set, or the last one reached zero, was
   * deleted or expired), and announces it. Safe to retry: a call whose reply was lost is retried
   * and answers as its first copy did.
   *
   * @param count - the number of count-downs that open the latch: a whole number >= 1.
   * @returns true when the count was set, false when a latch already existed (it is unchanged).
   * @throws {@link InvalidArgumentError} for a bad count or option, before any Redis command;
   *   a {@link LockError} `REDIS_ERROR` when Redis fails.
   * @example
   * ```ts
   * if (!(await latch.trySetCount(5, { ttlMs: 15 * 60_000 }))) console.log('already counting');
   * ```
   */
  async trySetCount(count: number, options?: LatchSetOptions): Promise<boolean> {
    const checked = checkCount(count);
    const given = checkOptions('options', options, SET_OPTIONS);
    const ttlMs = given.ttlMs === undefined ? 0 : checkDuration('ttlMs', given.ttlMs, 1);
    return this.#writes.giving(
      (requestKey, recordTtlMs) =>
        LATCH_PROTOCOL.trySetCount(this.#target, requestKey, checked, ttlMs, recordTtlMs),
      `setting the count of latch "${this.#name}"`,
      (set) => set && `The count of latch "${this.#name}" was set`,
    );
  }

  /**
   * Counts the latch down by one. At zero the key is deleted and everyone waiting is woken.
   * Counted once however often it is retried: the call carries a request id and a retried copy
   * of it (its reply was lost) finds what the first copy did, recorded beside the latch for a
   * little longer than the retries last (about 20 s with the default command timeout). On a
   * latch that does not exist it changes nothing (it never creates one) and resolves 0. With
   * `syncReplicas`, a count-down too few replicas acknowledged still resolves (it cannot be
   * undone), and the shortfall is reported on the `error` event; so are `trySetCount`'s and
   * `delete`'s.
   *
   * @returns the count after this call: 0 once the latch is open.
   * @throws a {@link LockError} `REDIS_ERROR` when Redis keeps failing through the retries:
   *   the count-down may or may not have been applied; calling again counts down again.
   * @example
   * ```ts
   * const left = await latch.countDown();
   * console.log(left === 0 ? 'last one: the latch is open' : `${left} to go`);
   * ```
   */
  countDown(): Promise<number> {
    return this.#engine.conditionTelemetry.countDown(this.#report, async () => {
      const { count } = await this.#writes.giving(
        (requestKey, recordTtlMs) => LATCH_PROTOCOL.countDown(this.#target, requestKey, recordTtlMs),
        `counting down latch "${this.#name}"`,
        ({ counted }) => counted && `Latch "${this.#name}" was counted down`,
      );
      return count;
    });
  }

  /**
   * The current count: 0 when the latch does not exist (never set, reached zero, deleted or
   * expired).
   *
   * @throws a {@link LockError} `REDIS_ERROR` when Redis fails or the key holds no count.
   * @example
   * ```ts
   * console.log(`${await latch.count()} workers still warming`);
   * ```
   */
  async count(): Promise<number> {
    this.#engine.assertOpen();
    const reply = await this.#engine.command(['GET', this.#target.key], `reading latch "${this.#name}"`);
    return this.#decoded(parseCount(reply), reply, 'reading the count');
  }

  /**
   * Waits until the count is zero. Resolves true at once when it already is — also when the
   * latch does not exist yet: await after `trySetCount`, or on a count set by whoever starts
   * the work. Woken by the latch's channel; a latch set with a `ttlMs` is also re-read when
   * its key is due to expire (an expired latch is open). After a subscriber reconnect every
   * waiter re-reads the count.
   *
   * @returns true once the count is zero; false when `waitMs` ran out first (as Redisson's
   *   `await(time, unit)`, not an error).
   * @throws `signal.reason` when aborted; {@link InvalidArgumentError} for bad options, before
   *   any Redis command; {@link ClientClosedError} when the client closes meanwhile; a
   *   {@link LockError} `REDIS_ERROR` when Redis fails, or when `waitMs` runs out while Redis
   *   cannot be reached (until then it keeps trying).
   * @example
   * ```ts
   * const warm = await latch.await({ waitMs: 60_000, signal: shutdown.signal });
   * ```
   */
  await(options?: LatchAwaitOptions): Promise<boolean> {
    let waitMs: number;
    let signal: AbortSignal | undefined;
    try {
      const given = checkOptions('options', options, AWAIT_OPTIONS);
      waitMs = given.waitMs === undefined ? Number.POSITIVE_INFINITY : checkWait('waitMs', given.waitMs);
      signal = checkSignal('signal', given.signal);
    } catch (error) {
      return Promise.reject(error);
    }
    const engine = this.#engine;
    const opening = (this.#opening ??= new LatchOpening(engine, this.#name, this.#target));
    // The wait's own promise, with no async function around it while telemetry records nothing.
    const telemetry = engine.conditionTelemetry;
    if (!telemetry.enabled) return engine.waitFor(opening, waitMs, signal);
    return telemetry.awaiting(this.#report, waitMs, signal, () => engine.waitFor(opening, waitMs, signal));
  }

  /**
   * Deletes the latch whatever its count, and wakes everyone waiting: they read a count of 0
   * and resolve true.
   *
   * @returns true when a latch was deleted, false when none existed.
   * @throws a {@link LockError} `REDIS_ERROR` when Redis fails.
   * @example
   * ```ts
   * await latch.delete(); // give up on the warm-up: let the waiting service start anyway
   * ```
   */
  async delete(): Promise<boolean> {
    // Deleting twice is deleting once: safe to retry as it is.
    return this.#writes.repeatable(
      LATCH_PROTOCOL.delete(this.#target),
      `deleting latch "${this.#name}"`,
      (deleted) => deleted && `Latch "${this.#name}" was deleted`,
    );
  }

  #decoded<T>(value: T | undefined, reply: unknown, doing: string): T {
    if (value !== undefined) return value;
    throw new LockError(
      'REDIS_ERROR',
      `Unexpected reply from Redis while ${doing} latch "${this.#name}": ${describe(reply)}`,
    );
  }
}
