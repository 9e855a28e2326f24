import type { LockSubscriberClient } from './redis.js';

/**
 * One local waiter in a lock's queue. Only the head of the queue is woken by an unlock
 * message, so a release wakes one waiter of this process, not the herd.
 * @internal
 */
export class Waiter {
  readonly #channel: ChannelState;
  #pending = false;
  #wake: (() => void) | undefined;

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
    return this.#until(ms, signal, (done, fail) => {
      this.#channel.ready.then(done, fail);
    });
  }

  /** Count of unlock messages seen on this channel; a change means "try again". */
  get generation(): number {
    return this.#channel.generation;
  }

  /** Makes the current or next `wait` return at once. */
  wake(): void {
    this.#pending = true;
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /**
   * Waits for a wake-up, at most `ms` milliseconds. Rejects with `signal.reason` on abort and
   * when the subscriptions close.
   */
  wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return this.#until(
      ms,
      signal,
      (done) => {
        this.#wake = () => {
          this.#pending = false;
          done();
        };
      },
      () => {
        this.#wake = undefined;
      },
    );
  }

  /**
   * Resolves after `ms` (never, for Infinity) or when `arm` calls `done`; rejects on abort,
   * when `arm` calls `fail`, and when the subscriptions close. Cleans up whichever way it ends.
   */
  #until(
    ms: number,
    signal: AbortSignal | undefined,
    arm: (done: () => void, fail: (error: unknown) => void) => void,
    disarm?: () => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let settled = false;
      const cleanUp = (): boolean => {
        if (settled) return false;
        settled = true;
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#channel.closing.delete(onClose);
        disarm?.();
        return true;
      };
      const done = (): void => {
        if (cleanUp()) resolve();
      };
      const fail = (error: unknown): void => {
        if (cleanUp()) reject(error);
      };
      const onAbort = (): void => fail(signal?.reason);
      const onClose = (error: Error): void => fail(error);
      if (Number.isFinite(ms)) timer = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#channel.closing.add(onClose);
      arm(done, fail);
    });
  }

  /** Leaves the queue; if this waiter was the head, the next one takes its turn at once. */
  leave(): void {
    const queue = this.#channel.waiters;
    const index = queue.indexOf(this);
    if (index === -1) return;
    queue.splice(index, 1);
    if (index === 0) queue[0]?.wake();
    this.#channel.owner.released(this.#channel);
  }
}

/** @internal */
interface ChannelState {
  readonly name: string;
  readonly owner: UnlockSubscriptions;
  readonly waiters: Waiter[];
  readonly closing: Set<(error: Error) => void>;
  ready: Promise<void>;
  generation: number;
  linger: NodeJS.Timeout | undefined;
}

/** @internal */
export interface SubscriptionsHost {
  /** Opens the subscriber connection (a `duplicate()` of the user's client). */
  connect(): Promise<LockSubscriberClient>;
  onError(error: Error): void;
  closedError(): Error;
}

/**
 * Shared subscriptions to unlock channels: one per lock per client, shared by all its local
 * waiters, kept for `lingerMs` after the last one leaves.
 * @internal
 */
export class UnlockSubscriptions {
  readonly #host: SubscriptionsHost;
  readonly #lingerMs: number;
  readonly #channels = new Map<string, ChannelState>();
  #subscriber: Promise<LockSubscriberClient> | undefined;
  #closed = false;
  readonly #onMessage = (_message: string, channel: string): void => {
    const state = this.#channels.get(channel);
    if (state === undefined) return;
    state.generation += 1;
    state.waiters[0]?.wake();
  };

  constructor(host: SubscriptionsHost, lingerMs: number) {
    this.#host = host;
    this.#lingerMs = lingerMs;
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
   * Joins the queue of a channel, subscribing first if this client is not subscribed yet.
   * `fresh` tells that the subscription is new: the caller must try again once it is ready,
   * since an unlock before it was confirmed was not heard.
   */
  join(channel: string): { waiter: Waiter; fresh: boolean } {
    if (this.#closed) throw this.#host.closedError();
    let state = this.#channels.get(channel);
    const fresh = state === undefined;
    if (state === undefined) {
      state = {
        name: channel,
        owner: this,
        waiters: [],
        closing: new Set(),
        ready: Promise.resolve(),
        generation: 0,
        linger: undefined,
      };
      state.ready = this.#subscribe(channel);
      // A waiter that stops waiting before the subscription settles must not leave an
      // unhandled rejection behind.
      state.ready.catch(() => undefined);
      this.#channels.set(channel, state);
    }
    if (state.linger !== undefined) {
      clearTimeout(state.linger);
      state.linger = undefined;
    }
    const waiter = new Waiter(state);
    state.waiters.push(waiter);
    return { waiter, fresh };
  }

  /** @internal Called by a waiter that left. */
  released(state: ChannelState): void {
    if (state.waiters.length > 0 || this.#closed) return;
    if (state.linger !== undefined) clearTimeout(state.linger);
    state.linger = setTimeout(() => this.#drop(state), this.#lingerMs);
    state.linger.unref();
  }

  /** After the subscriber reconnects, messages may have been lost: every queue re-checks. */
  resubscribed(): void {
    for (const state of this.#channels.values()) {
      state.generation += 1;
      state.waiters[0]?.wake();
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const error = this.#host.closedError();
    for (const state of this.#channels.values()) {
      if (state.linger !== undefined) clearTimeout(state.linger);
      for (const reject of [...state.closing]) reject(error);
    }
    this.#channels.clear();
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    if (subscriber !== undefined) {
      try {
        (await subscriber).destroy();
      } catch {
        // It never connected; nothing to close.
      }
    }
  }

  async #subscribe(channel: string): Promise<void> {
    this.#subscriber ??= this.#host.connect();
    let subscriber: LockSubscriberClient;
    try {
      subscriber = await this.#subscriber;
    } catch (error) {
      // Let the next waiter try to connect again.
      this.#subscriber = undefined;
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
