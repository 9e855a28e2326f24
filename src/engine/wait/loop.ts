import type { Notifications } from './channels.js';
import type { WaitListener, Waiter, WakePolicy, WakeReason } from './waiter.js';

/**
 * A settled promise whose reactions are the wait loop's next steps: a microtask as
 * `queueMicrotask` makes one, in the same order, without its per-call async resource.
 * @internal
 */
export const SETTLED: Promise<void> = Promise.resolve();

/**
 * One caller's wait, of any kind, as the {@link WaitLoop} drives it: its bounds and the state
 * kept between its steps. While it sleeps this is all that is kept of it (with its waiter): no
 * suspended function, so a process can keep many waiting at little cost.
 * @internal
 */
export abstract class Waiting implements WaitListener {
  /** Its place in the local queue of its channel, once it sleeps. */
  waiter: Waiter | undefined;
  /** Whether to try at once rather than sleep first. */
  tryNow = false;
  /** The waiter's generation when the attempt in flight was sent. */
  generation = 0;
  /**
   * When to try again with no news (monotonic ms): a lock's expected expiry (watched by the head
   * of the local queue), a condition's re-check bound. Infinity: only news.
   */
  recheckAt = Number.POSITIVE_INFINITY;

  constructor(
    /** Monotonic time at which the wait runs out. */
    readonly deadline: number,
    /** Whether the call may wait (waitMs > 0); when not, its first attempt decides it. */
    readonly waiting: boolean,
    readonly signal: AbortSignal | undefined,
    /** Goes on with the wait after a wake-up (the loop's). */
    readonly resume: (wait: never, reason: WakeReason) => void,
    /** Ends the call with an error. */
    readonly fail: (wait: never, error: unknown) => void,
  ) {}

  /**
   * See {@link WaitListener}: the wait goes on in a microtask, once whatever woke it (a message
   * handler, a timer, another waiter leaving) has returned, as after an awaited promise.
   */
  woken(reason: WakeReason): void {
    void SETTLED.then(() => (this.resume as (wait: this, reason: WakeReason) => void)(this, reason));
  }

  failed(error: unknown): void {
    void SETTLED.then(() => (this.fail as (wait: this, error: unknown) => void)(this, error));
  }
}

/** Where a wait listens, and how a message there wakes it. @internal */
export interface Listening {
  readonly channel: string;
  /** Whether it also needs this client's grant channel (a hold kind's hand-overs). */
  readonly grants: boolean;
  /** How many local waiters a message wakes, seeing each one's demand; default: the first. */
  readonly wakes?: WakePolicy | undefined;
  /** How much this wait asks for (a semaphore's permits); default 1. */
  readonly demand?: number | undefined;
}

/**
 * What a kind of wait supplies to the {@link WaitLoop}: how to try once, where it listens, how
 * long it sleeps, and how it ends. The loop owns the order of the steps.
 * @internal
 */
export interface WaitKind<W extends Waiting> {
  /** Where `wait` listens; asked once, before its first attempt. */
  listening(wait: W): Listening;
  /**
   * One attempt: resolves true when it ended the call (it found what the call waits for), false
   * when the call waits on, with `recheckAt` set. A rejection fails the call.
   */
  attempt(wait: W): Promise<boolean>;
  /** Called once `wait` joined its channel's local queue, before its subscription is confirmed. */
  joined(wait: W, waiter: Waiter): void;
  /** Whether the loop waits for the grant channel too before the first try after joining. */
  awaitsGrants(wait: W): boolean;
  /** How long `wait` sleeps at most before it tries with no news: at most `remaining`. */
  sleepMs(wait: W, remaining: number, now: number): number;
  /** Whether `wait` holds a grant, which outlasts its deadline (a hand-over being taken). */
  granted(wait: W): boolean;
  /** Ends the call without an attempt when a grant in hand can be taken so: true if it did. */
  take(wait: W): boolean;
  /** Ends the call whose wait ran out. */
  ranOut(wait: W): void;
  /** Ends the call with `error`. */
  fail(wait: W, error: unknown): void;
}

/**
 * The one wait loop, for every kind that waits: a hold kind's acquire, a semaphore's permits, a
 * latch's zero, a Redlock's pause. Try; when the call may wait, join the local queue of its
 * channel (and subscribe), try again once subscribed if a message may have gone unheard, then
 * sleep until a message, a hand-over, a reconnect or the kind's re-check bound, and try again;
 * a message that came while an attempt was in flight makes the next try immediate. It keeps no
 * suspended function per waiter: each step goes on from a callback.
 * @internal
 */
export class WaitLoop<W extends Waiting> {
  readonly #notifications: Notifications;
  readonly #kind: WaitKind<W>;
  readonly #assertOpen: () => void;

  constructor(notifications: Notifications, kind: WaitKind<W>, assertOpen: () => void) {
    this.#notifications = notifications;
    this.#kind = kind;
    this.#assertOpen = assertOpen;
  }

  /**
   * The first attempt; when the call may wait and did not get what it waits for, joins the local
   * queue (and subscribes), then goes on with the loop. Never rejects: it settles the call.
   */
  async start(wait: W): Promise<void> {
    const kind = this.#kind;
    const notifications = this.#notifications;
    const { signal, deadline } = wait;
    try {
      const listening = kind.listening(wait);
      const generationBefore = notifications.generationOf(listening.channel);
      if (await kind.attempt(wait)) return;
      if (!wait.waiting) {
        kind.ranOut(wait);
        return;
      }
      this.#assertOpen();
      signal?.throwIfAborted();
      const { channel, grants, wakes, demand } = listening;
      const joined = notifications.join(channel, grants, wakes, demand);
      const waiter = joined.waiter;
      wait.waiter = waiter;
      kind.joined(wait, waiter);
      if (joined.fresh || kind.awaitsGrants(wait)) {
        // Until SUBSCRIBE is confirmed a message would go unheard, so try again once it is.
        await waiter.untilReady(deadline - performance.now(), signal);
        this.#assertOpen();
        signal?.throwIfAborted();
      }
      // A first attempt sent before this client had the channel may have missed a message. That
      // message would have woken only the head of the local queue (unless the kind wakes more),
      // and the head is the waiter that subscribed, which tries again once it is confirmed (or,
      // leaving without what it waits for, wakes the next): a waiter joining behind it has
      // nothing to redo.
      const missed =
        generationBefore === undefined
          ? wakes !== undefined || waiter.isHead
          : generationBefore !== waiter.generation;
      wait.tryNow ||= joined.fresh || missed;
    } catch (error) {
      kind.fail(wait, error);
      return;
    }
    this.#step(wait, undefined);
  }

  /** Goes on with the loop after a wake-up. */
  readonly resume = (wait: W, reason: WakeReason): void => {
    this.#step(wait, reason);
  };

  /**
   * The loop, from its head or (with `woke`) from the end of a sleep: runs until it has to sleep
   * or wait for an attempt, or the call ends. Never throws: it settles the call.
   */
  #step(wait: W, woke: WakeReason | undefined): void {
    const kind = this.#kind;
    const { signal, deadline } = wait;
    const waiter = wait.waiter as Waiter;
    let reason = woke;
    try {
      for (;;) {
        if (reason === undefined && !wait.tryNow && !kind.granted(wait)) {
          const now = performance.now();
          const remaining = deadline - now;
          if (remaining <= 0) {
            kind.ranOut(wait);
            return;
          }
          reason = waiter.waitFor(kind.sleepMs(wait, remaining, now), signal, wait);
          // Sleeping: the wait's woken() or failed() goes on from here.
          if (reason === undefined) return;
        }
        if (reason !== undefined) {
          const ended = reason;
          reason = undefined;
          this.#assertOpen();
          signal?.throwIfAborted();
          // Becoming the head of the local queue is no news by itself: a new head only starts
          // watching the re-check bound, unless that is already due.
          if (ended === 'promoted' && wait.recheckAt > performance.now()) continue;
          if (ended === 'timeout' && performance.now() >= deadline) {
            kind.ranOut(wait);
            return;
          }
        } else if (!kind.granted(wait) && performance.now() >= deadline) {
          kind.ranOut(wait);
          return;
        }
        this.#try(wait, waiter);
        return;
      }
    } catch (error) {
      kind.fail(wait, error);
    }
  }

  /** The loop's try: what the kind can take without an attempt, or an attempt. */
  #try(wait: W, waiter: Waiter): void {
    if (this.#kind.take(wait)) return;
    wait.generation = waiter.generation;
    this.#kind.attempt(wait).then(
      (ended) => {
        if (ended) return;
        // A message that arrived while the attempt was in flight may be the change it missed.
        wait.tryNow = waiter.generation !== wait.generation;
        this.#step(wait, undefined);
      },
      (error: unknown) => this.#kind.fail(wait, error),
    );
  }
}
