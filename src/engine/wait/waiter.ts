import { unwatchAbort, watchAbort, type AbortWatcher } from '../timing.js';
import type { TimedOut, WaitTimer, WaitTimers } from './wait-timers.js';

/**
 * Why a wait ended: `attempt` — something may have freed the lock (an unlock message, a hand-over,
 * a reconnect), try now; `promoted` — this waiter became the head of the local queue and now
 * keeps the lock's expiry in view; `timeout` — the bound passed.
 * @internal
 */
export type WakeReason = 'attempt' | 'promoted' | 'timeout';

/**
 * Told how a wait of a {@link Waiter} ended: `woken` with the reason, or `failed` on abort and when
 * the subscriptions close. Called synchronously, from whatever ended the wait (a message, a timer,
 * another waiter leaving): a listener that does more than note it defers that work. @internal
 */
export interface WaitListener {
  woken(reason: WakeReason): void;
  failed(error: unknown): void;
}

/**
 * One local waiter in a lock's queue. Only the head of the queue is woken by an unlock
 * message, so a release wakes one waiter of this process, not the herd; a hand-over wakes the
 * waiter it was meant for.
 * @internal
 */
export class Waiter implements TimedOut, AbortWatcher {
  readonly #channel: ChannelState;
  #pending: WakeReason | undefined;
  // The wait in progress, if any. Kept in fields rather than closures: a process may have
  // tens of thousands of waiters, and each closure and context costs heap.
  #listener: WaitListener | undefined;
  #timer: WaitTimer | undefined;
  #signal: AbortSignal | undefined;
  /** Whether the wait in progress ends on a wake-up (`wait`) or only on its own terms (`untilReady`). */
  #wakeable = false;
  /** Woken to try since it last went to sleep: a wake-up it may not have used yet. */
  #woken = false;
  /** How much this waiter asks for (a semaphore's permits), for its channel's wake policy. */
  readonly demand: number;

  constructor(channel: ChannelState, demand: number) {
    this.#channel = channel;
    this.demand = demand;
  }

  get isHead(): boolean {
    return this.#channel.waiters[0] === this;
  }

  /**
   * Whether this waiter sleeps until a wake-up: not trying (an attempt in flight goes on after
   * it with a look at the channel's generation), not already woken, not waiting for its
   * subscription (it tries once that is confirmed).
   */
  get sleeping(): boolean {
    return this.#listener !== undefined && this.#wakeable;
  }

  /**
   * Waits until the subscription is confirmed, at most `ms` milliseconds. Rejects if
   * subscribing failed, with `signal.reason` on abort, and when the subscriptions close.
   */
  untilReady(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const listener: WaitListener = { woken: () => resolve(), failed: reject };
      this.#until(ms, signal, false, listener);
      if (this.#listener !== listener) return;
      // Only this wait: a later one is not ended by a subscription that settles late.
      this.#channel.ready.then(
        () => {
          if (this.#listener === listener) this.#settle('attempt');
        },
        (error: unknown) => {
          if (this.#listener === listener) this.#fail(error);
        },
      );
    });
  }

  /** Count of unlock messages seen on this channel; a change means "try again". */
  get generation(): number {
    return this.#channel.generation;
  }

  /** Makes the current or next `wait` return at once; `attempt` outranks `promoted`. */
  wake(reason: Exclude<WakeReason, 'timeout'> = 'attempt'): void {
    if (reason === 'attempt') this.#woken = true;
    if (this.#pending !== 'attempt') this.#pending = reason;
    if (!this.#wakeable) return;
    this.#pending = undefined;
    this.#settle(reason);
  }

  /**
   * Waits for a wake-up, at most `ms` milliseconds, and says what ended it. Rejects with
   * `signal.reason` on abort and when the subscriptions close.
   */
  wait(ms: number, signal: AbortSignal | undefined): Promise<WakeReason> {
    const pending = this.#pending;
    if (pending !== undefined) {
      this.#pending = undefined;
      return Promise.resolve(pending);
    }
    return new Promise<WakeReason>((resolve, reject) => {
      this.#until(ms, signal, true, { woken: resolve, failed: reject });
    });
  }

  /**
   * {@link Waiter.wait} without a promise: returns a wake-up already pending, or starts the wait
   * and returns undefined, `listener` being told how it ends. Throws `signal.reason` if the
   * signal aborted, and when the subscriptions are closed.
   */
  waitFor(ms: number, signal: AbortSignal | undefined, listener: WaitListener): WakeReason | undefined {
    const pending = this.#pending;
    if (pending !== undefined) {
      this.#pending = undefined;
      return pending;
    }
    this.#until(ms, signal, true, listener);
    return undefined;
  }

  /** @internal The subscriptions closed: the wait in progress fails with `error`. */
  closed(error: Error): void {
    this.#fail(error);
  }

  /** @internal The signal of the wait in progress aborted (this waiter is its listener). */
  handleEvent(): void {
    this.#fail(this.#signal?.reason);
  }

  /** @internal The bound of the wait in progress ran out. */
  timedOut(): void {
    this.#timer = undefined;
    this.#settle('timeout');
  }

  /**
   * Starts a wait that ends with `timeout` after `ms` (never, for Infinity), or when settled;
   * with `wakeable`, a wake-up settles it too. It fails on abort and when the subscriptions
   * close; if either happened already, `listener` is told at once. Cleans up whichever way it ends.
   */
  #until(ms: number, signal: AbortSignal | undefined, wakeable: boolean, listener: WaitListener): void {
    // A signal that aborted already fires no 'abort' event.
    if (signal?.aborted === true) {
      listener.failed(signal.reason);
      return;
    }
    // Closed while this waiter's last attempt was in flight: the close has told its waiters
    // already, and would never tell this one.
    if (this.#channel.owner.closed) {
      listener.failed(this.#channel.owner.closedError());
      return;
    }
    this.#listener = listener;
    this.#wakeable = wakeable;
    // Going back to sleep: whatever woke it before was used.
    if (wakeable) this.#woken = false;
    if (Number.isFinite(ms)) this.#timer = this.#channel.owner.timers.add(this, ms);
    if (signal !== undefined) {
      this.#signal = signal;
      watchAbort(signal, this);
    }
  }

  #settle(reason: WakeReason): void {
    const listener = this.#listener;
    if (listener === undefined) return;
    this.#cleanUp();
    listener.woken(reason);
  }

  #fail(error: unknown): void {
    const listener = this.#listener;
    if (listener === undefined) return;
    this.#cleanUp();
    listener.failed(error);
  }

  #cleanUp(): void {
    this.#listener = undefined;
    this.#wakeable = false;
    if (this.#timer !== undefined) {
      this.#channel.owner.timers.cancel(this.#timer);
      this.#timer = undefined;
    }
    if (this.#signal !== undefined) {
      unwatchAbort(this.#signal, this);
      this.#signal = undefined;
    }
  }

  /**
   * Leaves the queue. When the head leaves, the next waiter becomes the head: if the head took
   * the lock, the new head only starts watching its expiry; otherwise it may have taken an
   * unlock message with it, so the new head tries at once. On a channel whose messages wake
   * several waiters (a kind with a wake policy), the head, or a waiter woken since it last slept,
   * that leaves without what it waited for passes that wake-up on to the first waiter asleep: it
   * may have been meant for that one.
   */
  leave(acquired: boolean): void {
    const channel = this.#channel;
    const queue = channel.waiters;
    const index = queue.indexOf(this);
    if (index === -1) return;
    queue.splice(index, 1);
    if (channel.wakeBy !== undefined && !acquired && (index === 0 || this.#woken)) {
      // To one asleep: one whose attempt is in flight looks again anyway, and would use it up.
      queue.find((next) => next.sleeping)?.wake();
    } else if (index === 0) {
      queue[0]?.wake(acquired ? 'promoted' : 'attempt');
    }
    channel.owner.released(channel, this);
  }
}

/**
 * What a {@link Waiter} needs of the subscriptions its channel belongs to: whether they closed,
 * the bounds of its waits, and to hear that it left. @internal
 */
export interface ChannelOwner {
  /** Whether the subscriptions are closed. */
  readonly closed: boolean;
  /** What a wait rejects with once the subscriptions are closed. */
  closedError(): Error;
  /** The bounds of every wait of this client's waiters. */
  readonly timers: WaitTimers;
  /** Called by a waiter that left. */
  released(state: ChannelState, waiter: Waiter): void;
}

/** One channel's subscription and its local waiters. @internal */
export interface ChannelState {
  readonly name: string;
  readonly owner: ChannelOwner;
  /** Local waiters, the head first; made with the first one (an empty array grows to 17 slots). */
  waiters: Waiter[];
  ready: Promise<void>;
  generation: number;
  /** How a message wakes several of the waiters asleep; undefined: it wakes the head. */
  readonly wakeBy: WakeBy | undefined;
  /**
   * Whether the channel's presence twin is subscribed with it (a lock with a wait queue), so
   * that its scripts can tell latchkey's listeners from others (see `presenceChannel`).
   */
  readonly present: boolean;
}

/** A channel's wake policy and what it reads: the local waiters' demands. @internal */
export interface WakeBy {
  readonly policy: WakePolicy;
  /** The local waiters by what they ask for: demand -> how many ask for it. */
  readonly demands: Map<number, number>;
}

/**
 * A kind's wake policy: how many of a client's waiters asleep on a channel one message wakes,
 * read from the message (the free permits it announces, say) and the demands of the local
 * waiters (demand -> how many ask for it). `Infinity`: all of them.
 * @internal
 */
export type WakePolicy = (message: string, demands: ReadonlyMap<number, number>) => number;
