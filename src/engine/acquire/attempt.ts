import { LockLostError, ReplicationError } from '../../errors.js';
import { requestKey } from '../../keys.js';
import { isTransient } from '../../scripts/runner.js';
import { redisError, type Calls, type Synced } from '../calls.js';
import type { OperationChains } from '../chains.js';
import type { Events } from '../events.js';
import { Hold } from '../holds/hold.js';
import type { Holds } from '../holds/holds.js';
import { outcomeError } from '../outcome-error.js';
import { retryUnreplicated } from '../replication.js';
import type { ScriptCall } from '../script-call.js';
import { abortable } from '../timing.js';
import type { AcquireOutcome, AcquireRequest } from '../types.js';
import type { Notifications } from '../wait/channels.js';
import { sinceStart, type AcquireCall, type Attempt, type Settled } from './call.js';
import type { WaitQueue } from './hand-over.js';
import type { Ticket } from './ticket.js';

/** How long a cancelled acquire stays refused: past any late copy of it (rare, so generous). */
const CANCEL_RECORD_TTL_MS = 60_000;
/**
 * How long a lock's wait queue outlives the lease of the last waiter that joined or checked it.
 * Waiters check their place again whenever they try; an expired queue still leaves them the
 * unlock message.
 * @internal
 */
export const QUEUE_TTL_MS = 60_000;

/** Marks the owner's chain on the lock busy until `work` settles. */
type KeepBusy = (work: Promise<unknown>) => void;

/** What an attempt sent, and what the reply's acknowledgement count says. */
interface Sent {
  readonly request: AcquireRequest;
  /** The hold the attempt takes or re-enters. */
  readonly hold: Hold;
  /** The owner's hold of the lock before the attempt, if it had one. */
  readonly existing: Hold | undefined;
  readonly sentAt: number;
  readonly acknowledged: number;
}

/** The parts of the engine an attempt works with. @internal */
export interface AttemptParts {
  readonly calls: Calls;
  readonly chains: OperationChains;
  readonly holds: Holds;
  readonly notifications: Notifications;
  readonly events: Events;
  /** Tickets and the hand-overs heard for them. */
  readonly queue: WaitQueue;
  readonly assertOpen: () => void;
}

/**
 * One hold attempt of an acquire: serialized on the owner's chain, a hand-over heard is taken
 * without asking Redis, otherwise one synced request, repeated while the call's bound allows,
 * cancelled when its outcome is unknown, and its reply turned into a hold, a busy lock or an error.
 * @internal
 */
export class Attempts {
  readonly #calls: Calls;
  readonly #chains: OperationChains;
  readonly #holds: Holds;
  readonly #notifications: Notifications;
  readonly #events: Events;
  readonly #queue: WaitQueue;
  readonly #assertOpen: () => void;

  constructor(parts: AttemptParts) {
    this.#calls = parts.calls;
    this.#chains = parts.chains;
    this.#holds = parts.holds;
    this.#notifications = parts.notifications;
    this.#events = parts.events;
    this.#queue = parts.queue;
    this.#assertOpen = parts.assertOpen;
  }

  /** An attempt; a grant too few replicas acknowledged was rolled back: again while the wait allows. */
  run(call: AcquireCall): Promise<Settled> {
    // Without syncReplicas no grant is ever rolled back: no retry loop to set up.
    if (this.#calls.replication === undefined) return this.#once(call) as Promise<Settled>;
    return retryUnreplicated(
      () => this.#once(call),
      call.deadline,
      call.signal,
      this.#assertOpen,
      this.#calls.timeoutMs,
    );
  }

  #once(call: AcquireCall): Promise<Attempt> {
    const { ticket, signal } = call;
    const sent = this.#attempt(
      call,
      ticket !== undefined && this.#notifications.grantsReady ? ticket : undefined,
    );
    return signal === undefined ? sent : this.#abortable(call, sent, signal);
  }

  /** An attempt the caller may stop waiting for with `signal`. */
  async #abortable(call: AcquireCall, sent: Promise<Attempt>, signal: AbortSignal): Promise<Attempt> {
    try {
      return await abortable(sent, signal);
    } catch (error) {
      if (signal.aborted && error === signal.reason) {
        // What the attempt the caller stopped waiting for took must be given back.
        call.abandoned = sent.then(
          (outcome) =>
            'hold' in outcome && outcome.hold !== undefined ? this.#holds.release(outcome.hold) : undefined,
          () => undefined,
        );
        call.abandoned.catch(() => undefined);
      }
      throw error;
    }
  }

  /** One acquire request, serialized with every other request of the same owner on this lock. */
  #attempt(call: AcquireCall, ticket: Ticket | undefined): Promise<Attempt> {
    const { target, field, chain, ttlMs, watchdog, waiting } = call;
    return this.#chains.runKeepingBusy(chain, async (keepBusy) => {
      this.#assertOpen();
      const holds = this.#holds;
      if (ticket?.granted !== undefined) {
        const granted = this.#queue.takeGrant(call, ticket);
        if (granted !== undefined) return granted;
      }
      const existing = holds.get(chain);
      const expected = existing?.count ?? 0;
      // A re-entry keeps the mode and TTL of the first acquisition.
      const hold = existing ?? new Hold(target, field, ttlMs, watchdog, chain);
      if (ticket !== undefined) this.#queue.tickets.issue(ticket, this.#calls.nextRequestId());
      const request: AcquireRequest = {
        target,
        field,
        expected,
        requestKey: requestKey(target.key, this.#calls.nextRequestId()),
        leaseMs: hold.ttlMs,
        waiter: ticket?.entry(ticket.pending) ?? '',
        queuedAs: ticket?.entry(ticket.token) ?? '',
        queueTtlMs: hold.ttlMs + QUEUE_TTL_MS,
        waiting,
      };
      const sentAt = performance.now();
      const acquire = target.protocol.acquire(request, false);
      const { reply, acknowledged } = await this.#send(call, acquire, request, ticket, sentAt, keepBusy);
      const outcome = this.#decode(acquire, reply, ticket, sentAt);
      return this.#outcome(outcome, { request, hold, existing, sentAt, acknowledged }, keepBusy);
    });
  }

  /** What the acquire's reply says; the ticket's attempt is settled either way. */
  #decode(
    acquire: ScriptCall<AcquireOutcome>,
    reply: unknown,
    ticket: Ticket | undefined,
    sentAt: number,
  ): AcquireOutcome {
    let outcome: AcquireOutcome | undefined;
    try {
      outcome = acquire.decode(reply);
      return outcome;
    } finally {
      if (ticket !== undefined) {
        this.#queue.tickets.settle(ticket, sentAt, outcome?.status === 'busy' ? outcome.pushed : undefined);
      }
    }
  }

  /**
   * Sends the request, repeated while the call's bound allows. A failure after which the request
   * may still have been applied is cancelled; the ticket's attempt is settled either way.
   */
  async #send(
    call: AcquireCall,
    acquire: ScriptCall<AcquireOutcome>,
    request: AcquireRequest,
    ticket: Ticket | undefined,
    sentAt: number,
    keepBusy: KeepBusy,
  ): Promise<Synced> {
    const { target, deadline } = call;
    const protocol = target.protocol;
    try {
      return await this.#calls.synced(
        acquire,
        // A call with a deadline ends by it plus one command timeout, whatever Redis does; one
        // without keeps trying through an outage (as a semaphore's or a latch's wait does) until
        // its caller aborts or the client closes.
        () => (Number.isFinite(deadline) ? performance.now() < deadline : call.signal?.aborted !== true),
        deadline + this.#calls.timeoutMs,
        // A repeated call may find the entry its first copy queued.
        () => protocol.acquire(request, true),
      );
    } catch (error) {
      if (isTransient(error)) {
        // The request may still have been applied. Refuse any late replay of it and undo it
        // if it went through, before this owner's next request on the lock.
        keepBusy(this.#cancelAcquire(request));
        if (ticket !== undefined) {
          ticket.cancelled = true;
          this.#queue.tickets.leave(ticket, performance.now());
        }
      }
      if (ticket !== undefined) this.#queue.tickets.settle(ticket, sentAt, undefined);
      throw redisError(error, `acquiring lock "${target.name}" ${sinceStart(call)}`);
    }
  }

  /** What the acquire script's reply says: a hold, a busy lock, a rolled-back grant, or an error. */
  #outcome(outcome: AcquireOutcome, sent: Sent, keepBusy: KeepBusy): Attempt {
    const { request, hold, existing, sentAt, acknowledged } = sent;
    const { target, expected } = request;
    const holds = this.#holds;
    switch (outcome.status) {
      case 'held': {
        const required = this.#calls.replication?.count ?? 0;
        if (acknowledged < required) {
          // Too few replicas have the grant: a failover now could hand the lock to another
          // owner. Undo it (the request key also refuses any late copy) before this owner's
          // next request on the lock, and report it to the wait loop.
          const rollback = this.#cancelAcquire(request);
          keepBusy(rollback);
          return {
            rollback,
            unreplicated: new ReplicationError(
              `Lock "${target.name}" was granted but only ${acknowledged} of the ${required} replicas required acknowledged it within ${this.#calls.replication?.timeoutMs ?? 0} ms: the grant was rolled back`,
              acknowledged,
              required,
            ),
          };
        }
        if (hold.lost) {
          // Lost while this re-entry was in flight; the clean-up queued after it drops the field.
          throw hold.lostError ?? new LockLostError(`Lock "${target.name}" was lost`, 'not-owner');
        }
        hold.count = expected + 1;
        hold.extend(sentAt);
        if (existing === undefined) holds.add(hold);
        else holds.touched(hold);
        return { hold, proof: outcome.proof };
      }
      case 'busy':
        return { pttl: outcome.pttl };
      default:
        // A lost re-entry declares the owner's hold lost; a first acquire has none to declare.
        throw outcomeError(
          outcome,
          target.name,
          existing === undefined ? undefined : (message) => holds.markLost(existing, 'not-owner', message),
        );
    }
  }

  async #cancelAcquire(request: AcquireRequest): Promise<void> {
    const giveUpAt = performance.now() + request.leaseMs + CANCEL_RECORD_TTL_MS / 2;
    try {
      await this.#calls.idempotent(
        request.target.protocol.cancelAcquire(request, CANCEL_RECORD_TTL_MS),
        () => performance.now() < giveUpAt,
      );
    } catch (error) {
      this.#events.error(
        redisError(error, `cancelling an unconfirmed acquire of lock "${request.target.name}"`) as Error,
      );
    }
  }
}
