import { ClientClosedError } from '../../errors.js';
import { presenceChannel } from '../../keys.js';
import type { MessageListener, RedisConnection, Subscriber } from '../../redis/connection.js';
import type { Events } from '../events.js';
import type { Reachability } from '../reachability.js';
import type { ChannelState } from './waiter.js';

/** The presence twin's listener: nothing is published there. */
function noop(): void {}

/** What the subscriber connection tells the rest of the engine. @internal */
export interface SubscriberParts {
  readonly redis: RedisConnection;
  readonly reach: Reachability;
  readonly events: Events;
  readonly isClosed: () => boolean;
  /** After a reconnect: a hand-over or an unlock meanwhile went unheard. */
  readonly resubscribed: () => void;
}

/**
 * Opens the client's subscriber connection. Its failures, and a failure to open it, count as
 * Redis going unanswered: a waiter makes no call while it waits, so its subscriber is what sees
 * Redis go away.
 * @internal
 */
export async function openSubscriber(parts: SubscriberParts): Promise<Subscriber> {
  const { reach, events, isClosed } = parts;
  const sentAt = performance.now();
  let subscriber: Subscriber;
  try {
    subscriber = await parts.redis.openSubscriber({
      onError: (error) => {
        if (isClosed()) return;
        reach.failed(error);
        events.error(error);
      },
      // A hand-over while the subscriber was away skipped this client's waiters: each tries
      // again, and the attempt queues it anew if its entry is gone.
      onReconnect: () => {
        reach.answered();
        parts.resubscribed();
      },
    });
  } catch (error) {
    // Its waiters try again while they wait.
    reach.failed(error, sentAt);
    throw error;
  }
  reach.answered();
  if (isClosed()) {
    subscriber.destroy();
    throw new ClientClosedError();
  }
  return subscriber;
}

/**
 * The pause before subscribing again when Redis could not be reached (a failover, a restart):
 * the first, doubled after each failure up to the last.
 */
const FIRST_PAUSE_MS = 50;
const LAST_PAUSE_MS = 1_000;

/**
 * Subscribing again after Redis could not be reached, for as long as someone waits for it; each
 * waiter's own bound (its deadline, its signal) ends its wait meanwhile. Its pauses end early on
 * {@link Resubscribing.clear}, and never keep the process alive.
 * @internal
 */
export class Resubscribing {
  readonly #pauses = new Map<NodeJS.Timeout, () => void>();
  readonly #gaveUp: (error: unknown) => boolean;
  readonly #closed: () => Error | undefined;

  /**
   * `gaveUp(error)`: whether a failure ends the tries (anything but Redis out of reach);
   * `closed()`: the error a try rejects with once the subscriptions are closed, else undefined.
   */
  constructor(gaveUp: (error: unknown) => boolean, closed: () => Error | undefined) {
    this.#gaveUp = gaveUp;
    this.#closed = closed;
  }

  /** Runs `subscribe` until it succeeds, a failure ends the tries, or `wanted()` says no one waits. */
  async run(subscribe: () => Promise<unknown>, wanted: () => boolean): Promise<void> {
    for (let pauseMs = FIRST_PAUSE_MS; ; pauseMs = Math.min(2 * pauseMs, LAST_PAUSE_MS)) {
      try {
        await subscribe();
        return;
      } catch (error) {
        if (this.#closed() !== undefined || this.#gaveUp(error) || !wanted()) throw error;
      }
      await this.#pause(pauseMs);
      const closed = this.#closed();
      if (closed !== undefined) throw closed;
    }
  }

  /** Ends every pause now, on close: each try then rejects with the close's error. */
  clear(): void {
    for (const [timer, end] of this.#pauses) {
      clearTimeout(timer);
      end();
    }
    this.#pauses.clear();
  }

  #pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#pauses.delete(timer);
        resolve();
      }, ms);
      timer.unref();
      this.#pauses.set(timer, resolve);
    });
  }
}

/**
 * Subscribes to `state`'s channel; for a lock with a wait queue, to its presence twin first (in
 * order on the one connection), so this client never listens on the channel without it and
 * never counts as a foreign listener there (lua-scripts/include/foreign-waiters.lua).
 * @internal
 */
export function listen(
  subscriber: Subscriber,
  state: ChannelState,
  onMessage: MessageListener,
): Promise<unknown> {
  if (!state.present) return subscriber.subscribe(state.name, onMessage);
  return Promise.all([
    subscriber.subscribe(presenceChannel(state.name), noop),
    subscriber.subscribe(state.name, onMessage),
  ]);
}

/** Unsubscribes from `state`'s channel, and then from its presence twin, for the same reason. @internal */
export function unlisten(
  subscriber: Subscriber,
  state: ChannelState,
  onMessage: MessageListener,
): Promise<unknown> {
  if (!state.present) return subscriber.unsubscribe(state.name, onMessage);
  return Promise.all([
    subscriber.unsubscribe(state.name, onMessage),
    subscriber.unsubscribe(presenceChannel(state.name), noop),
  ]);
}
