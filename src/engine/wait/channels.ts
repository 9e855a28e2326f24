import type { Subscriber } from '../../redis/connection.js';
import { isUnreachable } from '../reachability.js';
import { listen, Resubscribing, unlisten } from './subscriber.js';
import { within } from '../timing.js';
import { IdleChannels } from './linger.js';
import { WaitTimers } from './wait-timers.js';
import { Waiter, type ChannelOwner, type ChannelState, type WakePolicy } from './waiter.js';

/** The `ready` of every channel whose subscription is confirmed. */
const SUBSCRIBED: Promise<void> = Promise.resolve();

function noop(): void {}

/** The keep-alive timer's period: the longest Node allows, so it practically never runs. */
const KEEP_ALIVE_MS = 2 ** 31 - 1;

/** How long close() waits for a subscriber connection that is still being opened. */
const CLOSE_WAIT_MS = 100;

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
export class Notifications implements ChannelOwner {
  readonly #host: SubscriptionsHost;
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
  /** Channels no one waits on, dropped once idle for `lingerMs`. */
  readonly #idle: IdleChannels;
  #grants: Promise<void> | undefined;
  #grantsReady = false;
  #closed = false;
  readonly #resubscribing = new Resubscribing(
    (error) => !isUnreachable(error),
    () => (this.#closed ? this.#host.closedError() : undefined),
  );
  readonly #onMessage = (message: string, channel: string): void => {
    const state = this.#channels.get(channel);
    if (state === undefined) return;
    state.generation += 1;
    const wakeBy = state.wakeBy;
    if (wakeBy === undefined) {
      state.waiters[0]?.wake();
      return;
    }
    let count = wakeBy.policy(message, wakeBy.demands);
    if (count <= 0) return;
    // The first `count` waiters asleep: one awake already tries (again, if a message came while
    // its attempt was in flight) and needs no wake-up of its own, which would go to waste.
    // Waking one may change the queue (a waiter that leaves promotes the next): wake from a copy.
    for (const waiter of state.waiters.slice()) {
      if (!waiter.sleeping) continue;
      waiter.wake();
      count -= 1;
      if (count <= 0) return;
    }
  };

  constructor(host: SubscriptionsHost, lingerMs: number) {
    this.#host = host;
    this.#idle = new IdleChannels(lingerMs, (state) => this.#drop(state));
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
   * waiters a message wakes (default: the first), seeing each waiter's `demand`. `fresh` tells
   * that the subscription is new: the caller must try again once it is ready, since an unlock
   * before it was confirmed was not heard.
   */
  join(channel: string, grants: boolean, wakes?: WakePolicy, demand = 1): { waiter: Waiter; fresh: boolean } {
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
        wakeBy: wakes === undefined ? undefined : { policy: wakes, demands: new Map() },
        present: grants,
      };
      const subscribed = this.#subscribe(state);
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
    const waiter = new Waiter(state, demand);
    if (state.waiters.length === 0) state.waiters = [waiter];
    else state.waiters.push(waiter);
    const demands = state.wakeBy?.demands;
    if (demands !== undefined) demands.set(demand, (demands.get(demand) ?? 0) + 1);
    this.#waiting += 1;
    if (this.#waiting === 1) this.#holdProcess();
    return { waiter, fresh };
  }

  /** @internal Called by a waiter that left. */
  released(state: ChannelState, waiter: Waiter): void {
    const demands = state.wakeBy?.demands;
    if (demands !== undefined) {
      const left = (demands.get(waiter.demand) ?? 1) - 1;
      if (left > 0) demands.set(waiter.demand, left);
      else demands.delete(waiter.demand);
    }
    this.#waiting -= 1;
    if (this.#waiting === 0) this.#holdProcess();
    if (state.waiters.length > 0 || this.#closed) return;
    this.#idle.add(state);
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
    this.timers.clear();
    this.#resubscribing.clear();
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
    await this.#resubscribing.run(
      async () => (await this.#connected()).subscribe(this.#host.grantChannel, this.#host.grantListener()),
      () => this.#waiting > 0,
    );
    this.#grantsReady = !this.#closed;
  }

  /** Keeps the process alive while anyone waits; lets it exit otherwise. */
  #holdProcess(): void {
    if (this.#waiting > 0) (this.#keepAlive ??= setInterval(noop, KEEP_ALIVE_MS)).ref();
    else this.#keepAlive?.unref();
  }

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

  /** Subscribes to `state`'s channel, for as long as it is this channel's state and waited on. */
  async #subscribe(state: ChannelState): Promise<void> {
    const current = (): boolean => this.#channels.get(state.name) === state;
    try {
      await this.#resubscribing.run(
        async () => listen(await this.#connected(), state, this.#onMessage),
        () => current() && state.waiters.length > 0,
      );
    } catch (error) {
      if (current()) this.#channels.delete(state.name);
      throw error;
    }
  }

  #drop(state: ChannelState): void {
    if (state.waiters.length > 0 || this.#channels.get(state.name) !== state) return;
    this.#channels.delete(state.name);
    const subscriber = this.#subscriber;
    if (subscriber === undefined) return;
    subscriber
      .then((client) => unlisten(client, state, this.#onMessage))
      .catch((error: unknown) => {
        if (!this.#closed) this.#host.onError(error instanceof Error ? error : new Error(String(error)));
      });
  }
}
