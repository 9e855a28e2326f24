/**
 * The client's record of where a waiter stands in a lock's wait queue: which hand-over it may
 * use without asking Redis. A hand-over is fresh only when it names the entry that the latest
 * attempt found queued; the chaos suite provokes the stalls that make one stale
 * (test/chaos/handover-stall.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { Ticket, TicketBook } from '../../src/engine/acquire/ticket.js';
import type { Target } from '../../src/engine/types.js';
import { reentrantProtocol } from '../../src/primitives/lock/protocol.js';

const TARGET: Target = {
  name: 'invoice:42',
  key: 'invoice:42',
  channel: 'redisson_lock__channel:{invoice:42}',
  protocol: reentrantProtocol(false),
};
const LEASE_MS = 1_000;

function queued(book: TicketBook, token: string, sentAt: number): Ticket {
  const ticket = new Ticket(TARGET, 'client:owner', LEASE_MS, 'latchkey_grant:abc');
  book.issue(ticket, token);
  book.settle(ticket, sentAt, true);
  return ticket;
}

describe('ticket', () => {
  it('uses a hand-over of the entry the latest attempt found queued, within half its lease', () => {
    const book = new TicketBook(60_000);
    const ticket = queued(book, 't1', 100);
    expect(book.waiting('t1')).toBe(ticket);
    ticket.granted = 't1';
    expect(ticket.takeGrant(100 + LEASE_MS / 2 - 1)).toBe(true);
    // The hand-over popped the entry: the waiter is no longer queued.
    expect(ticket.token).toBeUndefined();
  });

  it('refuses a hand-over read after half its lease, and keeps the entry for Redis to check', () => {
    const book = new TicketBook(60_000);
    const ticket = queued(book, 't1', 100);
    ticket.granted = 't1';
    expect(ticket.takeGrant(100 + LEASE_MS / 2)).toBe(false);
    expect(ticket.token).toBe('t1');
    expect(ticket.granted).toBeUndefined();
  });

  it('refuses a hand-over of an entry that a later attempt found gone and replaced', () => {
    const book = new TicketBook(60_000);
    const ticket = queued(book, 't1', 100);
    // The next attempt is sent; the old hand-over is read before its reply.
    book.issue(ticket, 't2');
    ticket.granted = 't1';
    book.settle(ticket, 5_000, true);
    expect(ticket.token).toBe('t2');
    expect(ticket.granted).toBeUndefined();
    expect(book.waiting('t1')).toBeUndefined();
    // Read after the reply, the old hand-over names no waiting ticket at all.
    expect(book.waiting('t2')).toBe(ticket);
    ticket.granted = 't1';
    expect(ticket.takeGrant(5_001)).toBe(false);
    expect(ticket.token).toBe('t2');
  });

  it('keeps the old entry when the attempt found it still queued, and dates it from that attempt', () => {
    const book = new TicketBook(60_000);
    const ticket = queued(book, 't1', 100);
    book.issue(ticket, 't2');
    book.settle(ticket, 900, false);
    expect(ticket.token).toBe('t1');
    expect(book.waiting('t2')).toBeUndefined();
    ticket.granted = 't1';
    expect(ticket.takeGrant(900 + LEASE_MS / 2 - 1)).toBe(true);
  });

  it('uses a hand-over of the new entry heard before the reply that queued it', () => {
    const book = new TicketBook(60_000);
    const ticket = queued(book, 't1', 100);
    book.issue(ticket, 't2');
    // The hand-over popped the new entry and its message beat the attempt's reply.
    expect(book.waiting('t2')).toBe(ticket);
    ticket.granted = 't2';
    book.settle(ticket, 2_000, true);
    expect(ticket.takeGrant(2_001)).toBe(true);
  });

  it('remembers the tokens of a waiter that gave up until its withdrawal is done', () => {
    const book = new TicketBook(60_000);
    const ticket = queued(book, 't1', 100);
    book.issue(ticket, 't2');
    book.leave(ticket, 3_000);
    expect(book.waiting('t1')).toBeUndefined();
    expect(book.left('t1')).toBe(ticket);
    expect(book.left('t2')).toBe(ticket);
    // The attempt in flight comes back: its new entry is the one to withdraw.
    book.settle(ticket, 3_001, true);
    expect(ticket.token).toBe('t2');
    expect(book.waiting('t2')).toBeUndefined();
    book.done(ticket);
    expect(book.left('t2')).toBeUndefined();
  });
});
