import { LockError } from '../errors.js';
import { isTransient } from '../scripts/runner.js';
import { redisError } from './calls.js';
import type { ConditionTelemetry } from './condition-telemetry.js';
import type { Notifications } from './wait/channels.js';
import type { Waiter, WakePolicy } from './wait/waiter.js';
import { abortable, within } from './timing.js';

/**
 * How long an aborted wait waits for an attempt in flight to be undone (permits it took given
 * back) before it rejects; the undoing goes on after that.
 */
const ABORT_CLEANUP_GRACE_MS = 50;

/**
 * How long the wait pauses before it tries again after a try that could not reach Redis:
 * doubled after each such try, up to the maximum, and back to the minimum after a try that got
 * through. A message or a reconnect ends the pause early.
 */
const UNREACHABLE_RETRY_MIN_MS = 50;
const UNREACHABLE_RETRY_MAX_MS = 1_000;

/**
 * Whether a try failed only because Redis did not answer in time or could not be reached (a
 * timeout, a lost or refused connection, a failover's LOADING or READONLY): worth another try
 * while the wait lasts. A refusal, an unexpected reply or a closed client is not.
 */
function unreachable(error: unknown): error is Error {
  if (error instanceof LockError) {
    return error.code === 'REDIS_ERROR' && error.cause !== undefined && isTransient(error.cause);
  }
  return isTransient(error);
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
 * Something a caller waits for that is not a hold: permits of a semaphore, a latch reaching zero.
 * The kind says how to try once and where a change is announced; the engine owns the waiting.
 * A try that fails because Redis could not be reached is tried again while the wait lasts, so
 * a try must leave nothing behind when it fails (a semaphore gives back what it may have taken).
 * @internal
 */
export interface Condition<T> {
  /** What is waited for, for messages: `semaphore "crawler"`. */
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
}

/** @internal */
export interface ConditionHost {
  readonly notifications: Notifications;
  /** Counts the local waiters. */
  readonly telemetry: ConditionTelemetry;
  assertOpen(): void;
}

/**
 * Waits until `condition` is met, at most `waitMs` from `startedAt` (monotonic ms): try; when not
 * met, subscribe to its channel, try again once subscribed, then try whenever a message, a
 * reconnect or a re-check bound says so. A try that could not reach Redis is tried again, after a
 * short pause, until the wait runs out, as a lock's attempt is retried until its deadline.
 * Resolves null when the wait runs out; rejects with the last try's failure instead when that
 * try could not reach Redis, and with `signal.reason` at once on abort, whatever is in flight — a
 * try in flight that succeeds after that is undone.
 * @internal
 */
export async function waitFor<T>(
  host: ConditionHost,
  condition: Condition<T>,
  waitMs: number,
  signal: AbortSignal | undefined,
  startedAt = performance.now(),
): Promise<T | null> {
  const deadline = startedAt + waitMs;
  const { notifications } = host;
  let abandoned: Promise<unknown> | undefined;
  /** The last try's failure while Redis could not be reached; undefined once a try got through. */
  let failure: Error | undefined;
  let pauseMs = UNREACHABLE_RETRY_MIN_MS;
  const attempt = async (): Promise<ConditionTry<T>> => {
    const sent = condition.attempt(deadline);
    let found: ConditionTry<T>;
    try {
      found = signal === undefined ? await sent : await abortable(sent, signal);
    } catch (error) {
      if (signal?.aborted === true && error === signal.reason) {
        abandoned = sent.then(
          (tried) => (tried.done ? condition.undo?.(tried.value) : undefined),
          () => undefined,
        );
        abandoned.catch(() => undefined);
        throw error;
      }
      if (!unreachable(error) || performance.now() >= deadline) throw error;
      failure = error;
      const recheckMs = pauseMs;
      pauseMs = Math.min(UNREACHABLE_RETRY_MAX_MS, pauseMs * 2);
      return { done: false, recheckMs };
    }
    failure = undefined;
    pauseMs = UNREACHABLE_RETRY_MIN_MS;
    return found;
  };
  /** The wait ran out: null, or the failure of a last try that could not reach Redis. */
  const ranOut = (): null => {
    if (failure !== undefined) throw failure;
    return null;
  };

  let waiter: Waiter | undefined;
  let met = false;
  try {
    host.assertOpen();
    signal?.throwIfAborted();
    const generationBefore = notifications.generationOf(condition.channel);
    let found = await attempt();
    // While Redis cannot be reached, no subscription can be made either: try again first, as a
    // lock's acquire does, and subscribe once a try got through.
    while (!found.done && failure !== undefined && waitMs !== 0) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) return ranOut();
      const pause = new Promise<void>((resolve) =>
        setTimeout(resolve, Math.min(remaining, found.done ? 0 : found.recheckMs)),
      );
      await (signal === undefined ? pause : abortable(pause, signal));
      host.assertOpen();
      found = await attempt();
    }
    if (found.done) {
      met = true;
      return found.value;
    }
    if (waitMs === 0) return ranOut();
    host.assertOpen();
    signal?.throwIfAborted();
    const joined = notifications.join(condition.channel, false, condition.wakes, condition.demand);
    waiter = joined.waiter;
    if (condition.kind !== undefined) host.telemetry.waiting(condition.kind, 1);
    if (joined.fresh) {
      // A change before SUBSCRIBE was confirmed went unheard: try again once it is.
      await waiter.untilReady(deadline - performance.now(), signal);
      host.assertOpen();
      signal?.throwIfAborted();
    }
    let recheckAt = performance.now() + found.recheckMs;
    let tryNow = joined.fresh || generationBefore !== waiter.generation;
    for (;;) {
      if (!tryNow) {
        const remaining = deadline - performance.now();
        if (remaining <= 0) return ranOut();
        const reason = await waiter.wait(Math.min(remaining, recheckAt - performance.now()), signal);
        host.assertOpen();
        signal?.throwIfAborted();
        if (reason === 'timeout' && performance.now() >= deadline) return ranOut();
        // Becoming the first local waiter is no news by itself.
        if (reason === 'promoted' && recheckAt > performance.now()) continue;
      }
      const generation = waiter.generation;
      found = await attempt();
      if (found.done) {
        met = true;
        return found.value;
      }
      recheckAt = performance.now() + found.recheckMs;
      // A message that arrived while the try was in flight may be the change it missed.
      tryNow = waiter.generation !== generation;
    }
  } catch (error) {
    if (signal?.aborted === true && error === signal.reason) throw error;
    throw redisError(error, `waiting for ${condition.what}`);
  } finally {
    if (waiter !== undefined) {
      waiter.leave(met);
      if (condition.kind !== undefined) host.telemetry.waiting(condition.kind, -1);
    }
    if (abandoned !== undefined) await within(abandoned, ABORT_CLEANUP_GRACE_MS);
  }
}
