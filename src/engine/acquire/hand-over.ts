import type { Calls } from '../calls.js';
import { chainId, type OperationChains } from '../chains.js';
import { Hold } from '../holds/hold.js';
import type { Holds } from '../holds/holds.js';
import type { AcquireCall } from './call.js';
import { type Ticket, TicketBook } from './ticket.js';

/** How long a ticket whose waiter gave up is remembered, so a late hand-over to it is returned. */
const LEFT_TICKET_TTL_MS = 5 * 60_000;

/**
 * This client's side of the wait queues in Redis, for kinds that have one: its tickets, the
 * hand-overs heard on its grant channel and taken without asking Redis, and the withdrawal of
 * waiters that gave up.
 * @internal
 */
export class WaitQueue {
  readonly tickets = new TicketBook(LEFT_TICKET_TTL_MS);
  readonly #calls: Calls;
  readonly #chains: OperationChains;
  readonly #holds: Holds;
  readonly #assertOpen: () => void;
  /** Acquire calls under way, by chain id (lock key + owner field). */
  readonly #acquiring = new Map<string, number>();

  constructor(calls: Calls, chains: OperationChains, holds: Holds, assertOpen: () => void) {
    this.#calls = calls;
    this.#chains = chains;
    this.#holds = holds;
    this.#assertOpen = assertOpen;
  }

  /** An acquire of the owner and lock of `chain` starts. */
  begin(chain: string): void {
    this.#acquiring.set(chain, (this.#acquiring.get(chain) ?? 0) + 1);
  }

  /** Whether an acquire of the owner and lock of `chain` is under way. */
  isAcquiring(chain: string): boolean {
    return this.#acquiring.has(chain);
  }

  /** An acquire of the owner and lock of `chain` ends. */
  end(chain: string): void {
    const others = (this.#acquiring.get(chain) ?? 1) - 1;
    if (others > 0) this.#acquiring.set(chain, others);
    else this.#acquiring.delete(chain);
  }

  /**
   * A release handed a lock to one of this client's tickets: the grant message is the ticket's
   * token, and the kind's proof after a space when it has one. The grant channel's listener
   * itself: a hand-over reaches it straight from the subscriber.
   */
  readonly onGrant = (message: string): void => {
    const space = message.indexOf(' ');
    const token = space === -1 ? message : message.slice(0, space);
    const ticket = this.tickets.waiting(token);
    if (ticket !== undefined) {
      ticket.granted = token;
      ticket.proof = space === -1 ? undefined : message.slice(space + 1);
      ticket.waiter?.wake('attempt');
      return;
    }
    const left = this.tickets.left(token);
    // Its waiter gave up: pass the lock on, unless the same owner has taken it since.
    if (left !== undefined) void this.withdraw(left);
  };

  /**
   * Takes the hand-over `ticket` heard, if it may be used without asking Redis: a release handed
   * the lock over after the latest attempt found this waiter queued, so the lease it set runs at
   * least from that attempt's send; with half of it left, it is held. Otherwise (or if this owner
   * took the lock meanwhile) the grant is dropped and an attempt confirms or re-enters. Runs
   * only while no other request of this owner on the lock is in flight.
   */
  takeGrant(
    call: AcquireCall,
    ticket: Ticket,
  ): { readonly hold: Hold; readonly proof: string | undefined } | undefined {
    const { target, chain } = call;
    const proof = ticket.proof;
    // A hand-over without the proof this kind's leases carry is confirmed by an attempt instead.
    // With syncReplicas, too: the confirming attempt waits for the replicas.
    if ((proof === undefined && target.protocol.needsProof) || this.#calls.replication !== undefined) {
      ticket.granted = undefined;
      return undefined;
    }
    const now = performance.now();
    if (!ticket.takeGrant(now) || this.#holds.get(chain) !== undefined) return undefined;
    const hold = new Hold(target, call.field, call.ttlMs, call.watchdog, chain);
    hold.count = 1;
    hold.extend(ticket.sentAt);
    this.#holds.add(hold, now);
    return { hold, proof };
  }

  /**
   * Takes a ticket whose waiter gave up out of the queue; if a release handed it the lock
   * meanwhile, passes the lock on. Runs after this owner's other requests on the lock, so after
   * an attempt still in flight. Until it is done the ticket's tokens are remembered, so a
   * hand-over to it that is heard meanwhile (or after it failed) is passed on as well.
   */
  async withdraw(ticket: Ticket): Promise<void> {
    const { target, field } = ticket;
    const chain = chainId(target.key, field);
    this.tickets.leave(ticket, performance.now());
    try {
      await this.#chains.run(chain, async () => {
        // Never queued, or the entry went with a hand-over this owner used.
        if (ticket.token === undefined) return;
        this.#assertOpen();
        // The owner's field is the hand-over's to give back only if nothing else of this owner
        // may stand behind it: no hold, and no other acquire whose own hand-over it may be.
        // Such an acquire is woken instead: its attempt finds the lock handed to it, or not.
        const waiting = this.#acquiring.has(chain);
        const handed = !this.#holds.has(chain) && !waiting;
        if (waiting) this.tickets.wakeOthers(ticket);
        const withdraw = target.protocol.queue?.withdraw(target, field, ticket.entry(ticket.token), handed);
        if (withdraw !== undefined) await this.#calls.idempotent(withdraw, (attempt) => attempt < 3);
      });
      if (!ticket.cancelled) this.tickets.done(ticket);
    } catch {
      // Remembered: a late hand-over to it is passed on when heard.
    }
  }
}
