import { setMaxListeners } from 'node:events';
import type { Condition, Engine } from '../engine/index.js';

/**
 * A condition met by a message on `channel`: one heard since the round before the pause began
 * (`heardSince`), or the first after the waiter subscribed. Nothing is read from Redis, the next
 * Redlock round does that.
 */
function anyMessage(what: string, channel: string, heardSince: () => boolean): Condition<true> {
  let tries = 0;
  return {
    what,
    channel,
    // A message wakes the first local waiter on that master only: the fewer contenders start a
    // round together, the rarer a split vote (two contenders on 3 or 5 masters never split).
    attempt: () => {
      tries += 1;
      return Promise.resolve(
        tries === 1 && !heardSince()
          ? { done: false, recheckMs: Number.POSITIVE_INFINITY }
          : { done: true, value: true },
      );
    },
  };
}

/** Where a pause listens and how it wakes. @internal */
export interface PauseSettings {
  readonly engines: readonly Engine[];
  /** Whether master `index` is listened to: connected, and it refused the lock last round. */
  readonly listensTo: (index: number) => boolean;
  readonly what: string;
  readonly channel: string;
  /** The longest pause. */
  readonly delayMs: number;
  /** Each master's {@link Engine.heardOn} of `channel` before the last round. */
  readonly heardBefore: readonly (number | undefined)[];
  /** After a message, the longest extra random wait before the pause ends; 0: none. */
  readonly jitterMs: number;
}

/**
 * Sleeps between two Redlock rounds for `delayMs` at most, or until an unlock message on the
 * lock's channel comes from a master listened to (each master's engine shares one subscriber
 * connection among all its waiters), one that came during the last round included; then, with
 * `jitterMs`, for a random part of that longer. Resolves early on nothing else; rejects with
 * `signal.reason` on abort.
 * @internal
 */
export async function pause(settings: PauseSettings, signal: AbortSignal | undefined): Promise<void> {
  const { engines, channel, delayMs, heardBefore, jitterMs } = settings;
  signal?.throwIfAborted();
  const stop = new AbortController();
  // Every master's wait listens on it, a few times each.
  setMaxListeners(8 + 4 * engines.length, stop.signal);
  const onAbort = (): void => stop.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  const timers: NodeJS.Timeout[] = [];
  const sleep = (ms: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, ms));
      timer.unref();
      timers.push(timer);
    });
  try {
    const waits: Promise<unknown>[] = [
      sleep(delayMs),
      new Promise<void>((_, reject) => {
        stop.signal.addEventListener('abort', () => reject(stop.signal.reason as Error), { once: true });
      }),
    ];
    for (const [index, engine] of engines.entries()) {
      // A master that is down is not subscribed to: its subscriber would wait for it to come
      // back. One that fails meanwhile wakes nobody: only the others and the timer do.
      if (!settings.listensTo(index)) continue;
      const before = heardBefore[index];
      const heardSince = (): boolean => {
        const now = engine.heardOn(channel);
        return now !== undefined && now !== before;
      };
      waits.push(
        engine.waitFor(anyMessage(settings.what, channel, heardSince), delayMs, stop.signal).then(
          (woken) =>
            woken === null
              ? new Promise<never>(() => undefined)
              : jitterMs > 0
                ? sleep(Math.random() * jitterMs)
                : undefined,
          () => new Promise<never>(() => undefined),
        ),
      );
    }
    await Promise.race(waits);
  } finally {
    for (const timer of timers) clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    // Ends the other masters' waits (they reject with this reason, which nobody reads).
    if (!stop.signal.aborted) stop.abort(new Error('pause over'));
  }
}
