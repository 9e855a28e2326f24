import { redisError } from './calls.js';
import type { Notifications, Waiter } from './notifications.js';
import { abortable, within } from './timing.js';

/**
 * How long an aborted wait waits for an attempt in flight to be undone (permits it took given
 * back) before it rejects; the undoing goes on after that.
 */
const ABORT_CLEANUP_GRACE_MS = 50;

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
 * @internal
 */
export interface Condition<T> {
  /** What is waited for, for messages: `semaphore "crawler"`. */
  readonly what: string;
  /** The channel a change is announced on. */
  readonly channel: string;
  /** How many local waiters a message wakes (default: the first). */
  readonly wakes?: (message: string) => number;
  /**
   * One try. `deadline` (monotonic ms) bounds its retries: the try ends by it plus one command
   * timeout, whatever Redis does.
   */
  attempt(deadline: number): Promise<ConditionTry<T>>;
  /** Gives back what a try that the caller stopped waiting for took, if anything. */
  undo?(value: T): Promise<unknown>;
}

/** @internal */
export interface ConditionHost {
  readonly notifications: Notifications;
  assertOpen(): void;
}

/**
 * Waits until `condition` is met, at most `waitMs` from `startedAt` (monotonic ms): try; when not
 * met, subscribe to its channel, try again once subscribed, then try whenever a message, a
 * reconnect or a re-check bound says so. Resolves null when the wait runs out; rejects with
 * `signal.reason` at once on abort, whatever is in flight — a try in flight that succeeds after
 * that is undone.
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
  const attempt = async (): Promise<ConditionTry<T>> => {
    const sent = condition.attempt(deadline);
    if (signal === undefined) return sent;
    try {
      return await abortable(sent, signal);
    } catch (error) {
      if (signal.aborted && error === signal.reason) {
        abandoned = sent.then(
          (found) => (found.done ? condition.undo?.(found.value) : undefined),
          () => undefined,
        );
        abandoned.catch(() => undefined);
      }
      throw error;
    }
  };

  let waiter: Waiter | undefined;
  let met = false;
  try {
    host.assertOpen();
    signal?.throwIfAborted();
    const generationBefore = notifications.generationOf(condition.channel);
    let found = await attempt();
    if (found.done) {
      met = true;
      return found.value;
    }
    if (waitMs === 0) return null;
    host.assertOpen();
    signal?.throwIfAborted();
    const joined = notifications.join(condition.channel, false, condition.wakes);
    waiter = joined.waiter;
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
        if (remaining <= 0) return null;
        const reason = await waiter.wait(Math.min(remaining, recheckAt - performance.now()), signal);
        host.assertOpen();
        signal?.throwIfAborted();
        if (reason === 'timeout' && performance.now() >= deadline) return null;
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
    waiter?.leave(met);
    if (abandoned !== undefined) await within(abandoned, ABORT_CLEANUP_GRACE_MS);
  }
}
