import { LockError } from '../errors.js';
import { redisError } from './calls.js';
import type { WakePolicy } from './wait/waiter.js';

/**
 * A wait's failure of Redis, saying how long the caller waited: a call that gives up says its own
 * time, not only that of its last try. Anything else (an abort's reason, a closed client, a kind's
 * own error) as it is.
 * @internal
 */
export function failedAfter(error: unknown, doing: string, startedAt: number): unknown {
  if (!(error instanceof LockError) || error.code !== 'REDIS_ERROR' || !(error.cause instanceof Error)) {
    return error;
  }
  return redisError(error.cause, `${doing} after ${Math.round(performance.now() - startedAt)} ms`);
}

/**
 * What one try of a {@link Condition} found: `done` with its result, or not yet — then the waiter
 * sleeps until a message on the condition's channel, or at most `recheckMs` (something may change
 * that announces nothing, such as a key's expiry; `Infinity`: only a message wakes it).
 * @internal
 */
export type ConditionTry<T> =
  { readonly done: true; readonly value: T } | { readonly done: false; readonly recheckMs: number };

/**
 * Something a caller waits for that is not a hold: permits of a semaphore, a latch reaching zero,
 * a message that ends a Redlock pause. The kind says how to try once and where a change is
 * announced; the engine's one wait loop does the waiting. A try that fails because Redis could
 * not be reached is tried again while the wait lasts, so a try must leave nothing behind when it
 * fails (a semaphore gives back what it may have taken). `T` is what a try that met it found, `R`
 * what the wait resolves with (see {@link Condition.end}).
 *
 * A waiting call keeps its condition for as long as it waits: a kind that keeps many waiting
 * makes it an object with methods and getters rather than closures, and `what` only when read.
 * @internal
 */
export interface Condition<T, R = T | null> {
  /** What is waited for, for messages (read only when one is made): `semaphore "crawler"`. */
  readonly what: string;
  /**
   * The kind, as telemetry names it (`latchkey.lock.kind`): `semaphore`, `count-down-latch`. Its
   * waiters are counted in `latchkey.waiters`; without it (Redlock's pause between rounds), not.
   */
  readonly kind?: string;
  /** The channel a change is announced on. */
  readonly channel: string;
  /** How many local waiters a message wakes (default: the first), seeing each one's `demand`. */
  readonly wakes?: WakePolicy;
  /** How much this wait asks for (a semaphore's permits), for `wakes`; default 1. */
  readonly demand?: number;
  /**
   * One try. `deadline` (monotonic ms) bounds its retries: the try ends by it plus one command
   * timeout, whatever Redis does. It may end sooner, failing, after retries of its own: the wait
   * tries again (with a fresh request) until `deadline`.
   */
  attempt(deadline: number): Promise<ConditionTry<T>>;
  /** Gives back what a try that the caller stopped waiting for took, if anything. */
  undo?(value: T): Promise<unknown>;
  /**
   * What the wait resolves with when it ends without failing, from `found`: what the try that met
   * the condition found, or null when the wait ran out. It may throw instead: the wait rejects
   * with that error as it is. Without it, the wait resolves with `found`.
   */
  end?(found: T | null): R;
}

/** What can close under a wait. @internal */
export interface ConditionHost {
  /** Throws once the client is closed. */
  assertOpen(): void;
}
