import pRetry from 'p-retry';
import { isTransient } from '../scripts/runner.js';

/**
 * When a failed script call is worth another try: only after a transient failure (a timeout, a
 * lost connection), never once the client is closed or past `until`, and while the caller's
 * `keepTrying` says so.
 * @internal
 */
export interface RetryPolicy {
  /** Whether the client is closed: no call gets through again. */
  readonly isClosed: () => boolean;
  /** Whether try `attempt` (1: the first one after the try that failed first) is still wanted. */
  readonly keepTrying: (attempt: number) => boolean;
  /** No try starts after this, monotonic ms; `Infinity`: no bound but `keepTrying`. */
  readonly until: number;
}

/**
 * After a first try failed with `error`: `tryAgain` with backoff (from 20 ms, doubling, jittered,
 * at most 1 s) while the policy allows; rejects with the first failure it does not retry.
 * @internal
 */
export function retryAfter<T>(error: unknown, tryAgain: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  const { isClosed, keepTrying, until } = policy;
  const retryable = (failure: unknown, attempt: number): boolean =>
    !isClosed() && isTransient(failure) && performance.now() < until && keepTrying(attempt);
  if (!retryable(error, 1)) return Promise.reject(error);
  return pRetry(tryAgain, {
    // Bounded by keepTrying and until, which every caller sets.
    retries: Number.POSITIVE_INFINITY,
    minTimeout: 20,
    maxTimeout: 1_000,
    factor: 2,
    randomize: true,
    unref: true,
    maxRetryTime: Number.isFinite(until) ? Math.max(0, until - performance.now()) : Number.POSITIVE_INFINITY,
    shouldRetry: ({ error: failure, attemptNumber }) => retryable(failure, attemptNumber + 1),
  });
}

/**
 * A plain read command's tries: `send` once and, after a transient failure, twice more (20 ms
 * apart at first, at most 200 ms) unless the client closed meanwhile.
 * @internal
 */
export function readRetried<T>(send: () => Promise<T>, isClosed: () => boolean): Promise<T> {
  return pRetry(send, {
    retries: 2,
    minTimeout: 20,
    maxTimeout: 200,
    unref: true,
    shouldRetry: ({ error }) => !isClosed() && isTransient(error),
  });
}
