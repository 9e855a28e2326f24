import { InvalidArgumentError } from '../../errors.js';
import { checkOptions, checkSignal, checkWait, describe } from '../../validate.js';

/** The most permits one call takes, gives or sets: Redisson counts permits in a Java `int`. */
export const MAX_PERMITS = 2_147_483_647;

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

/** Checks a count of permits: a whole number from `min` to {@link MAX_PERMITS}. @internal */
export function checkPermits(what: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_PERMITS) {
    throw new InvalidArgumentError(
      `Expected \`${what}\` to be a whole number from ${min} to ${MAX_PERMITS}, got ${describe(value)}`,
    );
  }
  return value;
}

/** Checks the options of an acquire; `waitMs` defaults to `defaultWaitMs`. @internal */
export function checkAcquireOptions(
  value: unknown,
  defaultWaitMs: number,
): { waitMs: number; signal: AbortSignal | undefined } {
  const options = checkOptions('options', value, ['waitMs', 'signal'] as const);
  return {
    waitMs: options.waitMs === undefined ? defaultWaitMs : checkWait('waitMs', options.waitMs),
    signal: checkSignal('signal', options.signal),
  };
}

/**
 * `(permits?, options?)` or `(options?)`: the permits (default 1) and the raw options.
 * @internal
 */
export function permitsAndOptions(first: unknown, second: unknown): [number, unknown] {
  if (typeof first === 'object' && first !== null && second === undefined) return [1, first];
  return [first === undefined ? 1 : checkPermits('permits', first, 1), second];
}
