import type { Subscriber } from '../redis/connection.js';
import { unwatchAbort, watchAbort, within, type AbortWatcher } from './timing.js';
import { WaitTimers, type TimedOut, type WaitTimer } from './wait-timers.js';

/** The `ready` of every channel whose subscription is confirmed. */
const SUBSCRIBED: Promise<void> = Promise.resolve();

function noop(): void {}

/** The keep-alive timer's period: the longest Node allows, so it practically never runs. */
const KEEP_ALIVE_MS = 2 ** 31 - 1;

/** How long close() waits for a subscriber connection that is still being opened. */
const CLOSE_WAIT_MS = 100;

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

  constructor(channel: ChannelState) {
    this.#channel = channel;
  }

  get isHead(): boolean {
    return this.#channel.waiters[0] === this;
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
   * unlock message with it, so the new head tries at once.
   */
  leave(acquired: boolean): void {
    const queue = this.#channel.waiters;
    const index = queue.indexOf(this);
    if (index === -1) return;
    queue.splice(index, 1);
    if (index === 0) queue[0]?.wake(acquired ? 'promoted' : 'attempt');
    this.#channel.owner.released(this.#channel);
  }
}

/** @internal */
interface ChannelState {
  readonly name: string;
  readonly owner: Notifications;
  /** Local waiters, the head first; made with the first one (an empty array grows to 17 slots). */
  waiters: Waiter[];
  ready: Promise<void>;
  generation: number;
  /** How many waiters a message wakes; undefined: the first. */
  wakes: ((message: string) => number) | undefined;
}

/** @internal */
export interface SubscriptionsHost {
  /** Opens the subscriber connection (a connection of its own, like the user's client). */
  connect(): Promise<Subscriber>;
  /** This client's grant channel. */
  readonly grantChannel: string;
  /**
   * The grant channel's listener, what to do with the ticket a hand-over names; asked for when
   * the channel is subscribed, with the first wait.
   */
  grantListener(): (ticket: string) => void;
  onError(error: Error): void;
  closedError(): Error;
}

/**
 * Shared subscriptions to unlock channels: one per lock per client, shared by all its local
 * waiters, kept for `lingerMs` after the last one leaves; and the client's own grant channel,
 * subscribed with the first wait and kept until close.
 * @internal
 */
export class Notifications {
  readonly #host: SubscriptionsHost;
  readonly #lingerMs: number;
  readonly #channels = new Map<string, ChannelState>();
  /** @internal The bounds of every wait of this client's waiters. */
  readonly timers = new WaitTimers();
  #subscriber: Promise<Subscriber> | undefined;
  /** Waiters of every channel. */
  #waiting = 0;
  /**
   * Keeps the process alive while anyone waits, and only then: a timer that never comes due,
   * ref'd while a waiter waits. The subscriber connection and the other timers never keep the
   * process alive, so a process that forgot `close()` can still exit. A timer's ref and unref
   * are plain calls, unlike a socket's, so a hand-over pays little for them.
   */
  #keepAlive: NodeJS.Timeout | undefined;
  /**
   * Channels no one waits on, with the time (monotonic) their last waiter left, the longest idle
   * first; dropped once idle for `lingerMs`.
   */
  readonly #idle = new Map<ChannelState, number>();
  /** The one timer that drops idle channels, armed while there are any. */
  #sweep: NodeJS.Timeout | undefined;
  #grants: Promise<void> | undefined;
  #grantsReady = false;
  #closed = false;
  readonly #onMessage = (message: string, channel: string): void => {
    const state = this.#channels.get(channel);
    if (state === undefined) return;
    state.generation += 1;
    if (state.wakes === undefined) {
      state.waiters[0]?.wake();
      return;
    }
    const count = state.wakes(message);
    // Waking one may change the queue (a waiter that leaves promotes the next): wake a copy.
    for (const waiter of state.waiters.slice(0, count)) waiter.wake();
  };

  constructor(host: SubscriptionsHost, lingerMs: number) {
    this.#host = host;
    this.#lingerMs = lingerMs;
  }

  /**
   * Whether the grant channel is subscribed: only then may an attempt queue a waiter, since a
   * hand-over to it must be heard.
   */
  get grantsReady(): boolean {
    return this.#grantsReady;
  }

  /** Whether {@link Notifications.close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** What a wait rejects with once the subscriptions are closed. */
  closedError(): Error {
    return this.#host.closedError();
  }

  /** Generation of a channel that is subscribed, or undefined when it is not (yet). */
  generationOf(channel: string): number | undefined {
    return this.#channels.get(channel)?.generation;
  }

  /** Channels currently subscribed or being subscribed. */
  get channelCount(): number {
    return this.#channels.size;
  }

  /**
   * Joins the queue of a channel, subscribing first if this client is not subscribed yet, and
   * to the grant channel too when `grants` is set (kinds with a wait queue). `wakes` says how many
   * waiters a message wakes (default: the first). `fresh` tells that the subscription is new: the
   * caller must try again once it is ready, since an unlock before it was confirmed was not heard.
   */
  join(
    channel: string,
    grants: boolean,
    wakes?: (message: string) => number,
  ): { waiter: Waiter; fresh: boolean } {
    if (this.#closed) throw this.#host.closedError();
    let state = this.#channels.get(channel);
    const fresh = state === undefined;
    if (state === undefined) {
      state = {
        name: channel,
        owner: this,
        waiters: [],
        ready: Promise.resolve(),
        generation: 0,
        wakes,
      };
      const subscribed = this.#subscribe(channel);
      state.ready = subscribed;
      // Once confirmed, the channel keeps a shared settled promise rather than its own.
      const confirmed = state;
      subscribed.then(() => {
        if (confirmed.ready === subscribed) confirmed.ready = SUBSCRIBED;
      }, noop);
      this.#channels.set(channel, state);
    }
    if (grants && !this.#grantsReady) {
      state.ready = Promise.all([state.ready, this.#listenForGrants()]).then(() => undefined);
    }
    // A waiter that stops waiting before the subscription settles must not leave an unhandled
    // rejection behind.
    state.ready.catch(() => undefined);
    this.#idle.delete(state);
    const waiter = new Waiter(state);
    if (state.waiters.length === 0) state.waiters = [waiter];
    else state.waiters.push(waiter);
    this.#waiting += 1;
    if (this.#waiting === 1) this.#holdProcess();
    return { waiter, fresh };
  }

  /** @internal Called by a waiter that left. */
  released(state: ChannelState): void {
    this.#waiting -= 1;
    if (this.#waiting === 0) this.#holdProcess();
    if (state.waiters.length > 0 || this.#closed) return;
    // No timer per channel: one sweep drops the channels idle for lingerMs, and a hand-over
    // that empties and refills a channel costs no timer call.
    this.#idle.set(state, performance.now());
    this.#sweepSoon();
  }

  /**
   * After the subscriber reconnects, unlock messages and hand-overs may have been lost (a
   * hand-over to a client that does not listen skips its waiters): every waiter tries again.
   */
  resubscribed(): void {
    for (const state of this.#channels.values()) {
      state.generation += 1;
      for (const waiter of state.waiters) waiter.wake('attempt');
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#grantsReady = false;
    const error = this.#host.closedError();
    for (const state of this.#channels.values()) {
      for (const waiter of [...state.waiters]) waiter.closed(error);
    }
    this.#channels.clear();
    this.#idle.clear();
    if (this.#sweep !== undefined) clearTimeout(this.#sweep);
    this.#sweep = undefined;
    this.timers.clear();
    if (this.#keepAlive !== undefined) clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    if (subscriber === undefined) return;
    const destroyed = subscriber.then(
      (client) => client.destroy(),
      // It never connected; nothing to close.
      () => undefined,
    );
    // A connection still being opened (to a server that is down or frozen, say) is closed as
    // soon as it opens; close() does not wait for it longer than a moment.
    await within(destroyed, CLOSE_WAIT_MS);
  }

  #listenForGrants(): Promise<void> {
    this.#grants ??= this.#subscribeGrants().catch((error: unknown) => {
      // The next waiter tries again.
      this.#grants = undefined;
      throw error;
    });
    return this.#grants;
  }

  async #subscribeGrants(): Promise<void> {
    const subscriber = await this.#connected();
    await subscriber.subscribe(this.#host.grantChannel, this.#host.grantListener());
    this.#grantsReady = !this.#closed;
  }

  /** Keeps the process alive while anyone waits; lets it exit otherwise. */
  #holdProcess(): void {
    if (this.#waiting > 0) (this.#keepAlive ??= setInterval(noop, KEEP_ALIVE_MS)).ref();
    else this.#keepAlive?.unref();
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

  async #connected(): Promise<Subscriber> {
    if (this.#subscriber === undefined) {
      const connecting = this.#host.connect();
      this.#subscriber = connecting;
      connecting.then(
        // While anyone waits, the keep-alive timer holds the process, not the connection.
        (subscriber) => {
          if (this.#subscriber === connecting) subscriber.unref();
        },
        () => undefined,
      );
    }
    try {
      return await this.#subscriber;
    } catch (error) {
      // Let the next waiter try to connect again.
      this.#subscriber = undefined;
      throw error;
    }
  }

  async #subscribe(channel: string): Promise<void> {
    let subscriber: Subscriber;
    try {
      subscriber = await this.#connected();
    } catch (error) {
      this.#channels.delete(channel);
      throw error;
    }
    try {
      await subscriber.subscribe(channel, this.#onMessage);
    } catch (error) {
      this.#channels.delete(channel);
      throw error;
    }
  }

  #drop(state: ChannelState): void {
    if (state.waiters.length > 0 || this.#channels.get(state.name) !== state) return;
    this.#channels.delete(state.name);
    const subscriber = this.#subscriber;
    if (subscriber === undefined) return;
    subscriber
      .then((client) => client.unsubscribe(state.name, this.#onMessage))
      .catch((error: unknown) => {
        if (!this.#closed) this.#host.onError(error instanceof Error ? error : new Error(String(error)));
      });
  }
}
