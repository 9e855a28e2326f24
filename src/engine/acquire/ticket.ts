import { queueMember } from '../../keys.js';
import type { Target } from '../types.js';
import type { Waiter } from '../wait/waiter.js';

/**
 * One waiting acquire's place in the lock's wait queue in Redis. A release hands the lock to the
 * first live entry in the queue and names the entry's token on its client's grant channel, so
 * the waiter may hold the lock without asking again.
 *
 * Every attempt that may queue the waiter carries a new token, and the acquire script checks the
 * queue rather than trusting the client: an entry that a release popped or dropped while this
 * client was not looking is replaced by the attempt's new entry, at the back. So a grant names
 * the entry it popped, and it is fresh only when that entry is the one the latest attempt found
 * queued: the grant then came after that attempt reached Redis. A grant heard after a reply that
 * replaced its entry is older than that reply, and worthless.
 * @internal
 */
export class Ticket {
  readonly target: Target;
  readonly field: string;
  readonly ttlMs: number;
  readonly #grantChannel: string;
  /** Token of the entry in the queue as of the latest reply; undefined: not queued. */
  token: string | undefined;
  /** Token of the entry the attempt in flight would push. */
  pending: string | undefined;
  /** Token a hand-over named, heard and not used yet. */
  granted: string | undefined;
  /** What the kind added to that hand-over (a fencing token), if anything. */
  proof: string | undefined;
  /**
   * When the latest attempt that found the entry `token` queued was sent: a hand-over that
   * popped that entry came later, so the lease it set runs at least until this time plus the
   * lease.
   */
  sentAt = 0;
  /**
   * An attempt carrying it was cancelled: a late copy of that attempt may still queue it, so it
   * stays remembered after its waiter is gone.
   */
  cancelled = false;
  waiter: Waiter | undefined;

  constructor(target: Target, field: string, ttlMs: number, grantChannel: string) {
    this.target = target;
    this.field = field;
    this.ttlMs = ttlMs;
    this.#grantChannel = grantChannel;
  }

  /** The queue entry of one of this ticket's tokens. Secret: it holds the owner field. */
  entry(token: string | undefined): string {
    return token === undefined ? '' : queueMember(token, this.ttlMs, this.#grantChannel, this.field);
  }

  /**
   * Takes the hand-over heard, if any: true when it may be used without asking Redis again —
   * it popped the entry the latest attempt found queued, and half of the lease it set is still
   * ahead by the client's clock. Then the entry is gone with it. Otherwise the entry is kept:
   * the next attempt finds it gone and queues the waiter anew, or finds the lock still handed
   * over; a withdrawal finds it gone and passes the lock on.
   */
  takeGrant(now: number): boolean {
    const granted = this.granted;
    this.granted = undefined;
    if (granted === undefined || granted !== this.token || now >= this.sentAt + this.ttlMs / 2) {
      return false;
    }
    this.token = undefined;
    return true;
  }
}

/**
 * The tickets of one client by token: those of waiting acquires, and for a while those whose
 * waiters gave up, so a hand-over to them that is heard late is passed on.
 * @internal
 */
export class TicketBook {
  readonly #waiting = new Map<string, Ticket>();
  readonly #left = new Map<string, { readonly ticket: Ticket; readonly leftAt: number }>();
  readonly #leftTtlMs: number;

  constructor(leftTtlMs: number) {
    this.#leftTtlMs = leftTtlMs;
  }

  /** The waiting ticket a token belongs to. */
  waiting(token: string): Ticket | undefined {
    return this.#waiting.get(token);
  }

  /** The ticket a token belonged to when its waiter gave up. */
  left(token: string): Ticket | undefined {
    return this.#left.get(token)?.ticket;
  }

  /** Gives the ticket a token for its next attempt. */
  issue(ticket: Ticket, token: string): void {
    ticket.pending = token;
    this.#waiting.set(token, ticket);
  }

  /**
   * Records the reply to the attempt that carried `ticket.pending`, sent at `sentAt`: the
   * entry in the queue is now the pending one (`pushed`) or still the old one. Undefined
   * `pushed`: the attempt took the lock or failed, and the waiter waits no more.
   */
  settle(ticket: Ticket, sentAt: number, pushed: boolean | undefined): void {
    const { pending, token } = ticket;
    ticket.pending = undefined;
    if (pushed === undefined) {
      this.#forget(pending);
      if (!ticket.cancelled) this.#forget(token);
      return;
    }
    ticket.sentAt = sentAt;
    if (pushed) {
      // The old entry was gone when this attempt ran: a hand-over heard for it is older.
      if (ticket.granted === token) ticket.granted = undefined;
      this.#forget(token);
      ticket.token = pending;
    } else {
      this.#forget(pending);
    }
  }

  /** The waiter stopped waiting; a hand-over heard for any of its tokens now is passed on. */
  leave(ticket: Ticket, now: number): void {
    for (const [token, left] of this.#left) {
      if (now - left.leftAt < this.#leftTtlMs) break;
      this.#left.delete(token);
    }
    for (const token of [ticket.token, ticket.pending]) {
      if (token === undefined) continue;
      this.#waiting.delete(token);
      this.#left.set(token, { ticket, leftAt: now });
    }
  }

  /**
   * Wakes the waiting tickets of the same owner on the same lock as `ticket`, so each asks
   * Redis where it stands.
   */
  wakeOthers(ticket: Ticket): void {
    for (const other of new Set(this.#waiting.values())) {
      if (other !== ticket && other.field === ticket.field && other.target.key === ticket.target.key) {
        other.waiter?.wake('attempt');
      }
    }
  }

  /** A ticket that gave up is out of the queue: forgets its tokens. */
  done(ticket: Ticket): void {
    for (const token of [ticket.token, ticket.pending]) {
      if (token !== undefined && this.#left.get(token)?.ticket === ticket) this.#left.delete(token);
    }
  }

  #forget(token: string | undefined): void {
    if (token !== undefined) this.#waiting.delete(token);
  }
}
