// This client's side of the wait queue, with the real holds and chains against fake calls (no
// Redis), on vitest's fake clock: acquires under way are counted per owner and lock, a grant heard
// wakes its waiter, a fresh grant becomes a hold without asking Redis and a stale or unproven
// one does not, and a waiter that gave up is withdrawn after its owner's other requests, passing
// on a lock handed to it only when nothing else of its owner may stand behind it.
import { EventEmitter } from 'eventemitter3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AcquireCall } from '../../../../src/engine/acquire/call.js';
import { WaitQueue } from '../../../../src/engine/acquire/hand-over.js';
import { Ticket } from '../../../../src/engine/acquire/ticket.js';
import type { Calls, Synced } from '../../../../src/engine/calls.js';
import { chainId, OperationChains } from '../../../../src/engine/chains.js';
import { Events } from '../../../../src/engine/events.js';
import { Hold } from '../../../../src/engine/holds/hold.js';
import { Holds } from '../../../../src/engine/holds/holds.js';
import { NO_TELEMETRY } from '../../../../src/engine/telemetry.js';
import { yesOrNo } from '../../../../src/engine/replies.js';
import { ScriptCall } from '../../../../src/engine/script-call.js';
import type { HeldLock, Protocol, Target } from '../../../../src/engine/types.js';
import type { Waiter, WakeReason } from '../../../../src/engine/wait/waiter.js';
import { ClientClosedError } from '../../../../src/errors.js';
import type { LockClientEvents } from '../../../../src/options.js';

const LEASE_MS = 10_000;
const FIELD = 'client:7';
const GRANTS = 'latchkey_grant:abc';

const WITHDRAW = { name: 'withdraw', numberOfKeys: 1 } as ScriptCall['script'];
const ABANDON = { name: 'abandon', numberOfKeys: 1 } as ScriptCall['script'];

function protocol(needsProof: boolean): Protocol {
  return {
    needsProof,
    queue: {
      withdraw: (target: Target, field: string, entry: string, handed: boolean): ScriptCall<boolean> =>
        new ScriptCall(WITHDRAW, [target.key], [field, entry, handed ? 'handed' : 'queued'], yesOrNo),
    },
    abandon: (hold: HeldLock): ScriptCall<boolean> => new ScriptCall(ABANDON, [hold.key], [], yesOrNo),
  } as unknown as Protocol;
}

const TARGET: Target = { name: 'orders', key: 'orders', channel: 'unlock:orders', protocol: protocol(false) };
const CHAIN = chainId(TARGET.key, FIELD);

/** The part of Calls the queue and its holds use: records each withdrawal. */
class FakeCalls {
  readonly timeoutMs = 1_000;
  replication: { count: number; timeoutMs: number } | undefined;
  readonly withdrawn: (readonly string[])[] = [];
  /** A failure for the next withdrawals. */
  failure: Error | undefined;
  idempotent(call: ScriptCall): Promise<unknown> {
    if (call.script.name !== 'withdraw') return Promise.resolve(1);
    this.withdrawn.push(call.args);
    return this.failure === undefined ? Promise.resolve(1) : Promise.reject(this.failure);
  }
  once(): Promise<Synced> {
    return Promise.resolve({ reply: 1, acknowledged: Number.POSITIVE_INFINITY });
  }
}

interface Setup {
  readonly queue: WaitQueue;
  readonly calls: FakeCalls;
  readonly chains: OperationChains;
  readonly holds: Holds;
  open: boolean;
}

/** A ticket the latest attempt, sent at `sentAt`, found queued under `token`. */
function queued(setup: Setup, token: string, sentAt: number, target = TARGET): Ticket {
  const ticket = new Ticket(target, FIELD, LEASE_MS, GRANTS);
  setup.queue.tickets.issue(ticket, token);
  setup.queue.tickets.settle(ticket, sentAt, true);
  return ticket;
}

function waiter(woken: WakeReason[]): Waiter {
  return { wake: (reason: WakeReason = 'attempt') => woken.push(reason) } as unknown as Waiter;
}

function acquireCall(target = TARGET): AcquireCall {
  return {
    target,
    field: FIELD,
    chain: chainId(target.key, FIELD),
    ttlMs: LEASE_MS,
    watchdog: false,
  } as AcquireCall;
}

/** Lets every callback already due run. */
async function flush(): Promise<void> {
  for (let i = 0; i < 20; i += 1) await Promise.resolve();
}

describe('WaitQueue', () => {
  const made: Setup[] = [];
  function setup(): Setup {
    const calls = new FakeCalls();
    const chains = new OperationChains();
    const holds = new Holds(
      calls as unknown as Calls,
      chains,
      new Events(new EventEmitter<LockClientEvents>()),
      {
        watchdogTimeoutMs: 30_000,
        longHoldWarningMs: 0,
        releaseRetryMs: 1_000,
        isClosed: () => false,
        telemetry: NO_TELEMETRY,
      },
    );
    const result: Setup = { queue: undefined as unknown as WaitQueue, calls, chains, holds, open: true };
    const queue = new WaitQueue(calls as unknown as Calls, chains, holds, () => {
      if (!result.open) throw new ClientClosedError();
    });
    made.push(result);
    return Object.assign(result, { queue });
  }
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(async () => {
    for (const { holds } of made.splice(0)) await holds.closeAll();
    vi.useRealTimers();
  });

  it('counts the acquires under way per owner and lock', () => {
    const { queue } = setup();
    const other = chainId('invoices', FIELD);
    queue.begin(CHAIN);
    queue.begin(CHAIN);
    expect(queue.isAcquiring(CHAIN)).toBe(true);
    expect(queue.isAcquiring(other)).toBe(false);
    queue.end(CHAIN);
    expect(queue.isAcquiring(CHAIN)).toBe(true);
    queue.end(CHAIN);
    expect(queue.isAcquiring(CHAIN)).toBe(false);
    // An end too many leaves no debt behind.
    queue.end(CHAIN);
    queue.begin(CHAIN);
    expect(queue.isAcquiring(CHAIN)).toBe(true);
  });

  it("wakes the waiter a grant names, and keeps the grant and the kind's proof for its attempt", () => {
    const fake = setup();
    const ticket = queued(fake, 't1', 0);
    const woken: WakeReason[] = [];
    ticket.waiter = waiter(woken);
    fake.queue.onGrant('t1 42');
    expect([ticket.granted, ticket.proof]).toEqual(['t1', '42']);
    expect(woken).toEqual(['attempt']);
    fake.queue.onGrant('t1');
    expect([ticket.granted, ticket.proof]).toEqual(['t1', undefined]);
    fake.queue.onGrant('t9');
    expect(woken).toEqual(['attempt', 'attempt']);
    expect(fake.calls.withdrawn).toEqual([]);
  });

  it('takes a fresh grant as a hold without asking Redis: its lease runs from the attempt that found it queued', () => {
    const fake = setup();
    vi.advanceTimersByTime(1_000);
    const sentAt = performance.now();
    const ticket = queued(fake, 't1', sentAt);
    vi.advanceTimersByTime(LEASE_MS / 2 - 1);
    fake.queue.onGrant('t1');
    const taken = fake.queue.takeGrant(acquireCall(), ticket);
    expect(taken?.proof).toBeUndefined();
    const hold = taken?.hold as Hold;
    expect(hold.count).toBe(1);
    expect(hold.validUntil).toBe(sentAt + LEASE_MS);
    expect(hold.acquiredAt).toBe(performance.now());
    expect(fake.holds.get(CHAIN)).toBe(hold);
    // The hand-over popped the entry: the waiter is queued no more.
    expect(ticket.token).toBeUndefined();
  });

  it('leaves a grant heard after half its lease to an attempt', () => {
    const fake = setup();
    const ticket = queued(fake, 't1', performance.now());
    vi.advanceTimersByTime(LEASE_MS / 2);
    fake.queue.onGrant('t1');
    expect(fake.queue.takeGrant(acquireCall(), ticket)).toBeUndefined();
    expect(fake.holds.has(CHAIN)).toBe(false);
    expect(ticket.token).toBe('t1');
  });

  it('leaves a grant to an attempt when the owner holds the lock already', () => {
    const fake = setup();
    const ticket = queued(fake, 't1', performance.now());
    const held = new Hold(TARGET, FIELD, LEASE_MS, false);
    held.count = 1;
    held.extend(performance.now());
    fake.holds.add(held);
    fake.queue.onGrant('t1');
    expect(fake.queue.takeGrant(acquireCall(), ticket)).toBeUndefined();
    expect(fake.holds.get(CHAIN)).toBe(held);
  });

  it('confirms by an attempt a grant that lacks the proof the kind needs, or that replicas must acknowledge', () => {
    const fenced: Target = { ...TARGET, protocol: protocol(true) };
    const unproven = setup();
    const ticket = queued(unproven, 't1', performance.now(), fenced);
    unproven.queue.onGrant('t1');
    expect(unproven.queue.takeGrant(acquireCall(fenced), ticket)).toBeUndefined();
    expect(ticket.granted).toBeUndefined();
    unproven.queue.onGrant('t1 17');
    expect(unproven.queue.takeGrant(acquireCall(fenced), ticket)?.proof).toBe('17');

    const replicated = setup();
    replicated.calls.replication = { count: 1, timeoutMs: 100 };
    const synced = queued(replicated, 't1', performance.now());
    replicated.queue.onGrant('t1');
    expect(replicated.queue.takeGrant(acquireCall(), synced)).toBeUndefined();
    expect(synced.granted).toBeUndefined();
    expect(replicated.holds.has(CHAIN)).toBe(false);
  });

  it('withdraws a waiter that gave up and passes on a lock handed to it, then forgets its ticket', async () => {
    const fake = setup();
    const ticket = queued(fake, 't1', performance.now());
    await fake.queue.withdraw(ticket);
    expect(fake.calls.withdrawn).toEqual([[FIELD, ticket.entry('t1'), 'handed']]);
    expect(fake.queue.tickets.left('t1')).toBeUndefined();
  });

  it('withdraws nothing for a waiter that was never queued', async () => {
    const fake = setup();
    const ticket = new Ticket(TARGET, FIELD, LEASE_MS, GRANTS);
    await fake.queue.withdraw(ticket);
    expect(fake.calls.withdrawn).toEqual([]);
  });

  it('gives back no hand-over while its owner holds the lock or another of its acquires waits, and wakes that one', async () => {
    const holding = setup();
    const held = new Hold(TARGET, FIELD, LEASE_MS, false);
    held.count = 1;
    held.extend(performance.now());
    holding.holds.add(held);
    await holding.queue.withdraw(queued(holding, 't1', performance.now()));
    expect(holding.calls.withdrawn.map((args) => args[2])).toEqual(['queued']);

    const waiting = setup();
    const leaving = queued(waiting, 't1', performance.now());
    const staying = queued(waiting, 't2', performance.now());
    const woken: WakeReason[] = [];
    staying.waiter = waiter(woken);
    waiting.queue.begin(CHAIN);
    await waiting.queue.withdraw(leaving);
    expect(waiting.calls.withdrawn.map((args) => args[2])).toEqual(['queued']);
    expect(woken).toEqual(['attempt']);
  });

  it("withdraws after the owner's request in flight on the lock", async () => {
    const fake = setup();
    const ticket = queued(fake, 't1', performance.now());
    let answer!: () => void;
    void fake.chains.run(CHAIN, () => new Promise<void>((resolve) => (answer = resolve)));
    const withdrawing = fake.queue.withdraw(ticket);
    await flush();
    expect(fake.calls.withdrawn).toEqual([]);
    answer();
    await withdrawing;
    expect(fake.calls.withdrawn).toHaveLength(1);
  });

  it('remembers a ticket it could not withdraw, and passes on a grant to it heard later', async () => {
    const fake = setup();
    const ticket = queued(fake, 't1', performance.now());
    fake.calls.failure = new Error('connection reset');
    await fake.queue.withdraw(ticket);
    expect(fake.queue.tickets.left('t1')).toBe(ticket);
    fake.calls.failure = undefined;
    fake.queue.onGrant('t1');
    await flush();
    expect(fake.calls.withdrawn.map((args) => args[2])).toEqual(['handed', 'handed']);
    expect(fake.queue.tickets.left('t1')).toBeUndefined();
  });

  it('sends no withdrawal once the client is closed, and remembers the ticket', async () => {
    const fake = setup();
    const ticket = queued(fake, 't1', performance.now());
    fake.open = false;
    await fake.queue.withdraw(ticket);
    expect(fake.calls.withdrawn).toEqual([]);
    expect(fake.queue.tickets.left('t1')).toBe(ticket);
  });
});
