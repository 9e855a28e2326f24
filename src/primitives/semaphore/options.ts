import { checkCallback } from '../../engine/index.js';
import { InvalidArgumentError } from '../../errors.js';
import type { SemaphoreOptions } from '../../options.js';
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

/**
 * A change of the count ({@link Semaphore.addPermits}): a whole number from -{@link MAX_PERMITS}
 * to {@link MAX_PERMITS}.
 * @internal
 */
export function checkPermitChange(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || Math.abs(value) > MAX_PERMITS) {
    throw new InvalidArgumentError(
      `Expected \`permits\` to be a whole number from -${MAX_PERMITS} to ${MAX_PERMITS}, got ${describe(value)}`,
    );
  }
  return value;
}

/** Checks a semaphore's options: the count a missing counter is created with, if any. @internal */
export function checkSemaphoreOptions(value: SemaphoreOptions | undefined): number | undefined {
  const options = checkOptions('options', value, ['permits'] as const);
  return options.permits === undefined ? undefined : checkPermits('permits', options.permits, 0);
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

/** `(permits?, options?)` or `(options?)`: the permits (default 1) and the raw options. */
function permitsAndOptions(first: unknown, second: unknown): [number, unknown] {
  if (typeof first === 'object' && first !== null && second === undefined) return [1, first];
  return [first === undefined ? 1 : checkPermits('permits', first, 1), second];
}

/** An acquire's arguments, checked. @internal */
export interface CheckedPermitAcquire {
  readonly permits: number;
  readonly waitMs: number;
  readonly signal: AbortSignal | undefined;
}

/**
 * Checks the arguments of `acquire` and `tryAcquire`, `(permits?, options?)` or `(options?)`:
 * permits default to 1, `waitMs` to `defaultWaitMs`.
 * @internal
 */
export function checkAcquireArgs(
  first: unknown,
  second: unknown,
  defaultWaitMs: number,
): CheckedPermitAcquire {
  const [permits, raw] = permitsAndOptions(first, second);
  return { permits, ...checkAcquireOptions(raw, defaultWaitMs) };
}

/**
 * Checks the arguments of `withPermits`, `(fn, options?)` or `(permits, fn, options?)`, in that
 * order: permits default to 1, `waitMs` to `Infinity`.
 * @internal
 */
export function checkWithPermitsArgs<T>(
  first: number | (() => T | PromiseLike<T>),
  second: (() => T | PromiseLike<T>) | SemaphoreAcquireOptions | undefined,
  third: SemaphoreAcquireOptions | undefined,
): CheckedPermitAcquire & { readonly fn: () => T | PromiseLike<T> } {
  const [permits, fn, raw] =
    typeof first === 'function' ? [1, first, second] : [checkPermits('permits', first, 1), second, third];
  checkCallback(fn);
  return { permits, fn, ...checkAcquireOptions(raw, Number.POSITIVE_INFINITY) };
}
