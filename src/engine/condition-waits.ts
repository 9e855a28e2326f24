import { LockError } from '../errors.js';
import { isTransient } from '../scripts/runner.js';
import { redisError } from './calls.js';
import { failedAfter, type Condition, type ConditionHost, type ConditionTry } from './condition.js';
import type { ConditionTelemetry } from './condition-telemetry.js';
import { abortable, within } from './timing.js';
import type { Notifications } from './wait/channels.js';
import { WaitLoop, Waiting, type Listening, type WaitKind } from './wait/loop.js';
import type { WakeReason } from './wait/waiter.js';

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

/** One caller's wait for a {@link Condition}. */
class ConditionWait<T> extends Waiting {
  /** The last try's failure while Redis could not be reached; undefined once a try got through. */
  failure: Error | undefined;
  /** The pause after the next try that cannot reach Redis. */
  pauseMs = UNREACHABLE_RETRY_MIN_MS;
  /** A try the caller stopped waiting for: what it took is being given back. */
  abandoned: Promise<unknown> | undefined;
  met = false;
  ended = false;

  constructor(
    readonly condition: Condition<T, unknown>,
    /** Monotonic time the caller's call started, which its wait counts from. */
    readonly startedAt: number,
    waitMs: number,
    signal: AbortSignal | undefined,
    resume: (wait: ConditionWait<T>, reason: WakeReason) => void,
    fail: (wait: ConditionWait<T>, error: unknown) => void,
    readonly resolve: (value: unknown) => void,
    readonly reject: (error: unknown) => void,
  ) {
    super(startedAt + waitMs, waitMs !== 0, signal, resume, fail);
  }
}

type AnyWait = ConditionWait<unknown>;

/** What a failed wait's message says it was doing. */
function waitingFor(wait: AnyWait): string {
  return `waiting for ${wait.condition.what}`;
}

/**
 * What a {@link Condition} brings to the one wait loop: its tries (a try that could not reach
 * Redis is tried again after a short pause, before the wait subscribes too), its channel and
 * wake policy, its re-check bound for every waiter, and an end that gives back what a try the
 * caller stopped waiting for took.
 * @internal
 */
export class ConditionWaits implements WaitKind<AnyWait> {
  readonly #host: ConditionHost;
  /** Counts the local waiters. */
  readonly #telemetry: ConditionTelemetry;
  readonly #loop: WaitLoop<AnyWait>;
  /** {@link ConditionWaits.fail}, as every wait's `fail`. */
  readonly #fail = (wait: AnyWait, error: unknown): void => {
    this.fail(wait, error);
  };

  constructor(notifications: Notifications, telemetry: ConditionTelemetry, host: ConditionHost) {
    this.#host = host;
    this.#telemetry = telemetry;
    this.#loop = new WaitLoop(notifications, this, () => host.assertOpen());
  }

  /**
   * Waits until `condition` is met, at most `waitMs` from `startedAt` (monotonic ms). Resolves
   * with what `condition.end` makes of what was found (null when the wait runs out); rejects with
   * the last try's failure instead when that try could not reach Redis (saying how long the call
   * waited), and with `signal.reason` at once on abort, whatever is in flight — a try in flight
   * that succeeds after that is undone. While it waits, the call keeps one ConditionWait (with
   * its waiter and `condition`) and no suspended function.
   */
  wait<T, R>(
    condition: Condition<T, R>,
    waitMs: number,
    signal: AbortSignal | undefined,
    startedAt: number,
  ): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      try {
        this.#host.assertOpen();
        signal?.throwIfAborted();
      } catch (error) {
        reject(failedAfter(error, `waiting for ${condition.what}`, startedAt));
        return;
      }
      // Held as a wait for any value: only `condition` makes its value, and only its `end` reads it.
      const wait: AnyWait = new ConditionWait<unknown>(
        condition,
        startedAt,
        waitMs,
        signal,
        this.#loop.resume,
        this.#fail,
        resolve as (value: unknown) => void,
        reject,
      );
      void this.#loop.start(wait);
    });
  }

  listening(wait: AnyWait): Listening {
    const { channel, wakes, demand } = wait.condition;
    return { channel, grants: false, wakes, demand };
  }

  async attempt(wait: AnyWait): Promise<boolean> {
    let found = await this.#try(wait);
    // While Redis cannot be reached, no subscription can be made either: before it joins, the
    // wait tries again after a pause, as a lock's acquire does, and joins once a try got through.
    while (!found.done && wait.waiter === undefined && wait.failure !== undefined && wait.waiting) {
      const remaining = wait.deadline - performance.now();
      if (remaining <= 0) {
        this.ranOut(wait);
        return true;
      }
      const pause = new Promise<void>((resolve) =>
        setTimeout(resolve, Math.min(remaining, found.done ? 0 : found.recheckMs)),
      );
      await (wait.signal === undefined ? pause : abortable(pause, wait.signal));
      this.#host.assertOpen();
      found = await this.#try(wait);
    }
    if (found.done) {
      wait.met = true;
      this.#end(wait, false, found.value);
      return true;
    }
    wait.recheckAt = performance.now() + found.recheckMs;
    return false;
  }

  /**
   * One try: a failure because Redis could not be reached is noted and turned into "not yet, try
   * again after a pause" while the wait lasts; on abort, what a try in flight took is given back.
   */
  async #try(wait: AnyWait): Promise<ConditionTry<unknown>> {
    const { condition, signal } = wait;
    const sent = condition.attempt(wait.deadline);
    let found: ConditionTry<unknown>;
    try {
      found = signal === undefined ? await sent : await abortable(sent, signal);
    } catch (error) {
      if (signal?.aborted === true && error === signal.reason) {
        wait.abandoned = sent.then(
          (tried) => (tried.done ? condition.undo?.(tried.value) : undefined),
          () => undefined,
        );
        wait.abandoned.catch(() => undefined);
        throw error;
      }
      if (!unreachable(error) || performance.now() >= wait.deadline) throw error;
      wait.failure = error;
      const recheckMs = wait.pauseMs;
      wait.pauseMs = Math.min(UNREACHABLE_RETRY_MAX_MS, wait.pauseMs * 2);
      return { done: false, recheckMs };
    }
    wait.failure = undefined;
    wait.pauseMs = UNREACHABLE_RETRY_MIN_MS;
    return found;
  }

  joined(wait: AnyWait): void {
    const kind = wait.condition.kind;
    if (kind !== undefined) this.#telemetry.waiting(kind, 1);
  }

  awaitsGrants(): boolean {
    return false;
  }

  sleepMs(wait: AnyWait, remaining: number, now: number): number {
    return Math.min(remaining, wait.recheckAt - now);
  }

  granted(): boolean {
    return false;
  }

  take(): boolean {
    return false;
  }

  /** The wait ran out: null, or the failure of a last try that could not reach Redis. */
  ranOut(wait: AnyWait): void {
    if (wait.failure !== undefined) this.fail(wait, wait.failure);
    else this.#end(wait, false, null);
  }

  fail(wait: AnyWait, error: unknown): void {
    const { signal } = wait;
    const failure =
      signal?.aborted === true && error === signal.reason ? error : redisError(error, waitingFor(wait));
    this.#end(wait, true, failure);
  }

  /**
   * Ends the wait: leaves the local queue, then, once a try the caller stopped waiting for was
   * undone (within a short grace), settles the caller's promise.
   */
  #end(wait: AnyWait, failed: boolean, outcome: unknown): void {
    if (wait.ended) return;
    wait.ended = true;
    const { waiter, condition } = wait;
    if (waiter !== undefined) {
      waiter.leave(wait.met);
      if (condition.kind !== undefined) this.#telemetry.waiting(condition.kind, -1);
    }
    if (wait.abandoned === undefined) {
      settle(wait, failed, outcome);
      return;
    }
    const settled = (): void => settle(wait, failed, outcome);
    void within(wait.abandoned, ABORT_CLEANUP_GRACE_MS).then(settled, settled);
  }
}

/**
 * Settles the caller's promise: a failure (saying how long the call waited), or what the
 * condition makes of `found` — an error it throws rejects as it is.
 */
function settle(wait: AnyWait, failed: boolean, found: unknown): void {
  if (failed) {
    wait.reject(failedAfter(found, waitingFor(wait), wait.startedAt));
    return;
  }
  const { condition } = wait;
  if (condition.end === undefined) {
    wait.resolve(found);
    return;
  }
  let ended: unknown;
  try {
    ended = condition.end(found);
  } catch (error) {
    wait.reject(error);
    return;
  }
  wait.resolve(ended);
}
