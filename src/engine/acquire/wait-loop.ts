import type { Telemetry } from '../telemetry.js';
import type { Target } from '../types.js';
import type { Notifications } from '../wait/channels.js';
import type { Waiter, WakeReason } from '../wait/waiter.js';
import type { OperationChains } from '../chains.js';
import type { Hold } from '../holds/hold.js';
import type { Lease } from '../lease.js';
import { Attempts, type AttemptParts } from './attempt.js';
import { noLease, type AcquireCall, type Settled } from './call.js';
import type { WaitQueue } from './hand-over.js';
import { Ticket } from './ticket.js';

/** The settings of an acquire's wait. @internal */
export interface WaitLoopSettings {
  /** This client's grant channel, named in its queue entries. */
  readonly grantChannel: string;
  /**
   * Whether waiters of kinds with a wait queue join it and are handed the lock; when not (a
   * Redis Cluster), they wait for the unlock message as the other kinds do.
   */
  readonly handOver: boolean;
  readonly assertOpen: () => void;
}

/** The parts of the engine an acquire's wait works with. @internal */
export interface WaitLoopParts extends Omit<AttemptParts, 'assertOpen'> {
  readonly telemetry: Telemetry;
}

/** How an acquire call ends, which the wait loop leaves to the acquirer. @internal */
export interface CallEnds {
  /** Ends the call with the kind's lease for a hold just taken. */
  handOut(call: AcquireCall, taken: { readonly hold: Hold; readonly proof: string | undefined }): void;
  /** Ends the call with `lease`, or null when its wait ran out. */
  end(call: AcquireCall, lease: Lease | null): void;
  /** Ends the call with `error`. */
  fail(call: AcquireCall, error: unknown): void;
}

/**
 * The wait loop of a hold kind's acquire: the first attempt; when the lock is held, the queue
 * (kinds with a wait queue) and the subscription; wake-ups on an unlock message, a hand-over,
 * the holder's expiry or a poll, each followed by an attempt; the deadline. It keeps no
 * suspended function per waiter: each step goes on from a callback.
 * @internal
 */
export class WaitLoop {
  readonly #settings: WaitLoopSettings;
  readonly #chains: OperationChains;
  readonly #notifications: Notifications;
  readonly #telemetry: Telemetry;
  readonly #attempts: Attempts;
  readonly #queue: WaitQueue;
  readonly #ends: CallEnds;

  constructor(settings: WaitLoopSettings, parts: WaitLoopParts, ends: CallEnds) {
    this.#settings = settings;
    this.#chains = parts.chains;
    this.#notifications = parts.notifications;
    this.#telemetry = parts.telemetry;
    this.#attempts = new Attempts({ ...parts, assertOpen: settings.assertOpen });
    this.#queue = parts.queue;
    this.#ends = ends;
  }

  /** Whether waiters of `target`'s kind join its wait queue in Redis on this client. */
  queuing(target: Target): boolean {
    return target.protocol.queue !== undefined && this.#settings.handOver;
  }

  /**
   * The first attempt; when the lock is held by another owner and the call may wait, joins the
   * local queue (and subscribes), then hands over to the wait loop. Never rejects: it settles
   * the call.
   */
  async start(call: AcquireCall): Promise<void> {
    const { target, signal, deadline } = call;
    const protocol = target.protocol;
    const notifications = this.#notifications;
    try {
      const channel = protocol.waitChannel?.(target, call.field) ?? target.channel;
      const generationBefore = notifications.generationOf(channel);
      const outcome = await this.#attempts.run(call);
      if (outcome.hold !== undefined) {
        this.#ends.handOut(call, outcome);
        return;
      }
      call.lastPttl = outcome.pttl;
      if (!call.waiting) {
        this.#ends.end(call, noLease(call));
        return;
      }
      const queue = this.queuing(target);
      if (queue) call.ticket ??= new Ticket(target, call.field, call.ttlMs, this.#settings.grantChannel);

      this.#settings.assertOpen();
      signal?.throwIfAborted();
      const joined = notifications.join(channel, queue, protocol.wakes);
      const waiter = joined.waiter;
      call.waiter = waiter;
      this.#telemetry.waiting(target, 1);
      if (call.ticket !== undefined) call.ticket.waiter = waiter;
      if (joined.fresh || (queue && !notifications.grantsReady)) {
        // Until SUBSCRIBE is confirmed an unlock would go unheard, so try again once it is.
        await waiter.untilReady(deadline - performance.now(), signal);
        this.#settings.assertOpen();
        signal?.throwIfAborted();
      }
      // When the lock is expected to expire, as far as this waiter knows: an expired lock
      // publishes nothing, so the head of the local queue wakes up then. Kinds whose holders may
      // announce nothing also re-check at growing intervals.
      call.expiresAt = outcome.pttl >= 0 ? performance.now() + outcome.pttl : Number.POSITIVE_INFINITY;
      call.pollMs = protocol.poll?.minMs ?? Number.POSITIVE_INFINITY;
      // A first attempt sent before this client had the channel may have missed an unlock. That
      // message would have woken only the head of the local queue (unless the kind wakes more),
      // and the head is the waiter that subscribed, which tries again once it is confirmed (or,
      // leaving without the lock, wakes the next): a waiter joining behind it has nothing to redo.
      const missed =
        generationBefore === undefined
          ? protocol.wakes !== undefined || waiter.isHead
          : generationBefore !== waiter.generation;
      call.tryNow = joined.fresh || missed || (call.ticket !== undefined && call.ticket.token === undefined);
    } catch (error) {
      this.#ends.fail(call, error);
      return;
    }
    this.#step(call, undefined);
  }

  /** Goes on with the wait loop after a wake-up. */
  readonly resume = (call: AcquireCall, reason: WakeReason): void => {
    this.#step(call, reason);
  };

  /**
   * The wait loop, from its head or (with `woke`) from the end of a wait: runs until it has to
   * wait for a wake-up or an attempt, or the call ends. Never throws: it settles the call.
   */
  #step(call: AcquireCall, woke: WakeReason | undefined): void {
    const { signal, deadline, target } = call;
    const waiter = call.waiter as Waiter;
    let reason = woke;
    try {
      for (;;) {
        if (reason === undefined) {
          if (call.ticket?.granted === undefined && performance.now() >= deadline) {
            this.#ends.end(call, noLease(call));
            return;
          }
          if (!call.tryNow && call.ticket?.granted === undefined) {
            const remaining = deadline - performance.now();
            if (remaining <= 0) {
              this.#ends.end(call, noLease(call));
              return;
            }
            const untilExpiry = call.expiresAt - performance.now();
            const bound = Math.min(
              waiter.isHead ? Math.min(untilExpiry, remaining, call.pollMs) : remaining,
              target.protocol.heartbeatMs ?? Number.POSITIVE_INFINITY,
            );
            reason = waiter.waitFor(bound, signal, call);
            // Waiting: the call's woken() or failed() goes on from here.
            if (reason === undefined) return;
          }
        }
        if (reason !== undefined) {
          const ended = reason;
          reason = undefined;
          this.#settings.assertOpen();
          signal?.throwIfAborted();
          // A new head only starts watching the expiry, unless that is already due.
          if (ended === 'promoted' && call.expiresAt > performance.now()) continue;
          if (ended === 'timeout' && performance.now() >= deadline) {
            this.#ends.end(call, noLease(call));
            return;
          }
        }
        this.#tryNow(call, waiter);
        return;
      }
    } catch (error) {
      this.#ends.fail(call, error);
    }
  }

  /**
   * The wait loop's try: a hand-over heard while this owner has nothing in flight on the lock is
   * taken here, without the operation chain and its promises (the same check an attempt starts
   * with); otherwise an attempt goes out, and {@link WaitLoop.#attempted} goes on when it is back.
   */
  #tryNow(call: AcquireCall, waiter: Waiter): void {
    const ticket = call.ticket;
    if (ticket?.granted !== undefined && this.#chains.idle(call.chain) && this.#notifications.grantsReady) {
      const granted = this.#queue.takeGrant(call, ticket);
      if (granted !== undefined) {
        this.#ends.handOut(call, granted);
        return;
      }
    }
    call.generation = waiter.generation;
    this.#attempts.run(call).then(
      (outcome) => this.#attempted(call, outcome),
      (error: unknown) => this.#ends.fail(call, error),
    );
  }

  /** An attempt of the wait loop came back. */
  #attempted(call: AcquireCall, outcome: Settled): void {
    try {
      if (outcome.hold !== undefined) {
        this.#ends.handOut(call, outcome);
        return;
      }
      call.lastPttl = outcome.pttl;
      call.expiresAt = outcome.pttl >= 0 ? performance.now() + outcome.pttl : Number.POSITIVE_INFINITY;
      const poll = call.target.protocol.poll;
      if (poll !== undefined) call.pollMs = Math.min(poll.maxMs, call.pollMs * 2);
      // A message that arrived while the attempt was in flight may be the release it missed.
      call.tryNow = (call.waiter as Waiter).generation !== call.generation;
    } catch (error) {
      this.#ends.fail(call, error);
      return;
    }
    this.#step(call, undefined);
  }
}
