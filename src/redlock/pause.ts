import { setMaxListeners } from 'node:events';
import type { Condition } from '../engine/condition.js';
import type { Engine } from '../engine/engine.js';

/**
 * A condition met by the first message on `channel` after the waiter subscribed: nothing is read
 * from Redis, the next Redlock round does that.
 */
function anyMessage(what: string, channel: string): Condition<true> {
  let tries = 0;
  return {
    what,
    channel,
    // A message wakes the first local waiter on that master only: the fewer contenders start a
    // round together, the rarer a split vote (two contenders on 3 or 5 masters never split).
    attempt: () => {
      tries += 1;
      return Promise.resolve(
        tries === 1 ? { done: false, recheckMs: Number.POSITIVE_INFINITY } : { done: true, value: true },
      );
    },
  };
}

/**
 * Sleeps between two Redlock rounds for `delayMs` at most, or, with `listen`, until an unlock
 * message arrives from any master that is connected, on the lock's channel (each master's engine
 * shares one subscriber connection among all its waiters). Resolves early on nothing else; rejects with `signal.reason` on
 * abort.
 * @internal
 */
export async function pause(
  engines: readonly Engine[],
  ready: (index: number) => boolean,
  what: string,
  channel: string,
  delayMs: number,
  listen: boolean,
  signal: AbortSignal | undefined,
): Promise<void> {
  signal?.throwIfAborted();
  const stop = new AbortController();
  // Every master's wait listens on it, a few times each.
  setMaxListeners(8 + 4 * engines.length, stop.signal);
  const onAbort = (): void => stop.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  try {
    const waits: Promise<unknown>[] = [
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, delayMs));
        timer.unref();
      }),
      new Promise<void>((_, reject) => {
        stop.signal.addEventListener('abort', () => reject(stop.signal.reason as Error), { once: true });
      }),
    ];
    if (listen) {
      for (const [index, engine] of engines.entries()) {
        // A master that is down is not subscribed to: its subscriber would wait for it to come
        // back. One that fails meanwhile wakes nobody: only the others and the timer do.
        if (!ready(index)) continue;
        waits.push(
          engine.waitFor(anyMessage(what, channel), delayMs, stop.signal).then(
            (woken) => (woken === null ? new Promise<never>(() => undefined) : undefined),
            () => new Promise<never>(() => undefined),
          ),
        );
      }
    }
    await Promise.race(waits);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    // Ends the other masters' waits (they reject with this reason, which nobody reads).
    if (!stop.signal.aborted) stop.abort(new Error('pause over'));
  }
}
