import type { ChannelState } from './waiter.js';

/**
 * The channels no one waits on, kept subscribed for `lingerMs` after their last waiter left. No
 * timer per channel: one sweep drops the channels idle for lingerMs, and a hand-over that empties
 * and refills a channel costs no timer call.
 * @internal
 */
export class IdleChannels {
  readonly #lingerMs: number;
  readonly #drop: (state: ChannelState) => void;
  /**
   * Channels no one waits on, with the time (monotonic) their last waiter left, the longest idle
   * first; dropped once idle for `lingerMs`.
   */
  readonly #idle = new Map<ChannelState, number>();
  /** The one timer that drops idle channels, armed while there are any. */
  #sweep: NodeJS.Timeout | undefined;

  constructor(lingerMs: number, drop: (state: ChannelState) => void) {
    this.#lingerMs = lingerMs;
    this.#drop = drop;
  }

  /** The last waiter of `state` left now. */
  add(state: ChannelState): void {
    this.#idle.set(state, performance.now());
    this.#sweepSoon();
  }

  /** Someone waits on `state` again. */
  delete(state: ChannelState): void {
    this.#idle.delete(state);
  }

  /** Forgets every idle channel and disarms the sweep. */
  clear(): void {
    this.#idle.clear();
    if (this.#sweep !== undefined) clearTimeout(this.#sweep);
    this.#sweep = undefined;
  }

  /** Arms the sweep for the channel idle longest, unless it is armed already. */
  #sweepSoon(): void {
    if (this.#sweep !== undefined) return;
    const since = this.#idle.values().next().value;
    if (since === undefined) return;
    const due = since + this.#lingerMs - performance.now();
    this.#sweep = setTimeout(this.#sweepIdle, Math.max(1, Math.ceil(due)));
    this.#sweep.unref();
  }

  /** Drops the channels idle for `lingerMs` or more, then arms the sweep for the next. */
  readonly #sweepIdle = (): void => {
    this.#sweep = undefined;
    const now = performance.now();
    for (const [state, since] of this.#idle) {
      // Idle longest first: the rest are younger.
      if (since + this.#lingerMs > now) break;
      this.#idle.delete(state);
      this.#drop(state);
    }
    this.#sweepSoon();
  };
}
