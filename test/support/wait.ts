/**
 * Timing helpers for tests: sleeping, polling a condition with a deadline, settling a promise
 * without throwing, and bounding a promise so that a hang fails the test instead.
 */

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `condition` every 5 ms until it holds; rejects, naming `what`, after `timeoutMs`. */
export async function waitUntil(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await sleep(5);
  }
}

/** How a promise settled, and when (performance.now()). */
export interface Settled<T> {
  readonly value?: T;
  readonly error?: unknown;
  readonly at: number;
}

/** Settles `promise` and reports how, and when (performance.now()), without throwing. */
export async function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  try {
    const value = await promise;
    return { value, at: performance.now() };
  } catch (error) {
    return { error, at: performance.now() };
  }
}

/** What {@link within} rejects with: `what` did not settle in time. */
export class NotSettledError extends Error {}

/** `promise`, or a rejection after `ms`: a deadlock fails the test instead of hanging it. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NotSettledError(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
