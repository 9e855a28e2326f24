import type { Telemetry } from '../telemetry.js';
import type { Target } from '../types.js';
import type { Notifications } from '../wait/channels.js';
import type { Listening, WaitKind } from '../wait/loop.js';
import type { Waiter } from '../wait/waiter.js';
import type { OperationChains } from '../chains.js';
import type { Hold } from '../holds/hold.js';
import type { Lease } from '../lease.js';
import { Attempts, type AttemptParts } from './attempt.js';
import { noLease, type AcquireCall, type Settled } from './call.js';
import type { WaitQueue } from './hand-over.js';
import { Ticket } from './ticket.js';

/** The settings of a hold kind's wait. @internal */
export interface HoldWaitSettings {
  /** This client's grant channel, named in its queue entries. */
  readonly grantChannel: string;
  /**
   * Whether waiters of kinds with a wait queue join it and are handed the lock; when not (a
   * Redis Cluster), they wait for the unlock message as the other kinds do.
   */
  readonly handOver: boolean;
  readonly assertOpen: () => void;
}

/** The parts of the engine a hold kind's wait works with. @internal */
export interface HoldWaitParts extends Omit<AttemptParts, 'assertOpen'> {
  readonly telemetry: Telemetry;
}

/** How an acquire call ends, which the wait leaves to the acquirer. @internal */
export interface CallEnds {
  /** Ends the call with the kind's lease for a hold just taken. */
  handOut(call: AcquireCall, taken: { readonly hold: Hold; readonly proof: string | undefined }): void;
  /** Ends the call with `lease`, or null when its wait ran out. */
  end(call: AcquireCall, lease: Lease | null): void;
  /** Ends the call with `error`. */
  fail(call: AcquireCall, error: unknown): void;
}

/**
 * What a hold kind's acquire brings to the wait loop: an attempt that takes the lock (or is
 * handed it), the wait queue and hand-overs of kinds that have one, and, for the head of the
 * local queue, the holder's expiry (an expired lock publishes nothing) and the kind's poll.
 * @internal
 */
export class HoldWaits implements WaitKind<AcquireCall> {
  readonly #settings: HoldWaitSettings;
  readonly #chains: OperationChains;
  readonly #notifications: Notifications;
  readonly #telemetry: Telemetry;
  readonly #attempts: Attempts;
  readonly #queue: WaitQueue;
  readonly #ends: CallEnds;

  constructor(settings: HoldWaitSettings, parts: HoldWaitParts, ends: CallEnds) {
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

  listening(call: AcquireCall): Listening {
    const { target, field } = call;
    const protocol = target.protocol;
    return {
      channel: protocol.waitChannel?.(target, field) ?? target.channel,
      grants: this.queuing(target),
      wakes: protocol.wakes,
    };
  }

  /** An attempt: a hold ends the call; a busy lock says when it is expected to expire. */
  async attempt(call: AcquireCall): Promise<boolean> {
    const outcome = await this.#attempts.run(call);
    return this.#attempted(call, outcome);
  }

  #attempted(call: AcquireCall, outcome: Settled): boolean {
    if (outcome.hold !== undefined) {
      this.#ends.handOut(call, outcome);
      return true;
    }
    call.lastPttl = outcome.pttl;
    // When the lock is expected to expire, as far as this waiter knows: an expired lock
    // publishes nothing, so the head of the local queue wakes up then.
    call.recheckAt = outcome.pttl >= 0 ? performance.now() + outcome.pttl : Number.POSITIVE_INFINITY;
    // Kinds whose holders may announce nothing also re-check at growing intervals.
    const poll = call.target.protocol.poll;
    if (poll !== undefined) {
      call.pollMs = call.waiter === undefined ? poll.minMs : Math.min(poll.maxMs, call.pollMs * 2);
    }
    return false;
  }

  joined(call: AcquireCall, waiter: Waiter): void {
    const { target, field } = call;
    this.#telemetry.waiting(target, 1);
    if (this.queuing(target)) {
      call.ticket ??= new Ticket(target, field, call.ttlMs, this.#settings.grantChannel);
      call.ticket.waiter = waiter;
      // A ticket not yet in the queue in Redis joins it with the next attempt.
      if (call.ticket.token === undefined) call.tryNow = true;
    }
  }

  awaitsGrants(call: AcquireCall): boolean {
    return call.ticket !== undefined && !this.#notifications.grantsReady;
  }

  sleepMs(call: AcquireCall, remaining: number, now: number): number {
    const bound =
      call.waiter?.isHead === true ? Math.min(call.recheckAt - now, remaining, call.pollMs) : remaining;
    return Math.min(bound, call.target.protocol.heartbeatMs ?? Number.POSITIVE_INFINITY);
  }

  granted(call: AcquireCall): boolean {
    return call.ticket?.granted !== undefined;
  }

  /**
   * A hand-over heard while this owner has nothing in flight on the lock is taken here, without
   * the operation chain and its promises (the same check an attempt starts with).
   */
  take(call: AcquireCall): boolean {
    const ticket = call.ticket;
    if (ticket?.granted === undefined || !this.#chains.idle(call.chain) || !this.#notifications.grantsReady) {
      return false;
    }
    const granted = this.#queue.takeGrant(call, ticket);
    if (granted === undefined) return false;
    this.#ends.handOut(call, granted);
    return true;
  }

  ranOut(call: AcquireCall): void {
    this.#ends.end(call, noLease(call));
  }

  fail(call: AcquireCall, error: unknown): void {
    this.#ends.fail(call, error);
  }
}
