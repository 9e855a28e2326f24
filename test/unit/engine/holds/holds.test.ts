// The holds of one client, with their real watchdog, renewal and release, against fake calls
// (no Redis) on vitest's fake clock: a hold is kept until its last release, renewed while the
// watchdog keeps it, lost at its deadline when nothing renews it (and dropped in Redis), lost at
// once when it is given up elsewhere or force-unlocked, and given up on close; each loss aborts
// its signal and is reported once.
import { EventEmitter } from 'eventemitter3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ClientClosedError, LockError } from '../../../../src/errors.js';
import type { Calls, Synced } from '../../../../src/engine/calls.js';
import { OperationChains } from '../../../../src/engine/chains.js';
import { Events } from '../../../../src/engine/events.js';
import { Hold } from '../../../../src/engine/holds/hold.js';
import { Holds } from '../../../../src/engine/holds/holds.js';
import { NO_TELEMETRY } from '../../../../src/engine/telemetry.js';
import { renewedFlags, yesOrNo } from '../../../../src/engine/replies.js';
import { ScriptCall } from '../../../../src/engine/script-call.js';
import type { HeldLock, Protocol, ReleaseOutcome, Target } from '../../../../src/engine/types.js';
import type { LockClientEvents, LockLostEvent } from '../../../../src/options.js';

const WATCHDOG_MS = 3_000;
const LEASE_MS = 1_000;

/** Fake scripts, each declaring the keys its calls name (a variable number for the renewal). */
function script(name: string, numberOfKeys: number | null): ScriptCall['script'] {
  return { name, numberOfKeys } as ScriptCall['script'];
}
const SCRIPTS = {
  renew: script('renew', null),
  release: script('release', 1),
  abandon: script('abandon', 1),
  forceRelease: script('force-release', 1),
};
const RELEASE_OUTCOMES = new Set<unknown>(['partial', 'freed', 'absent', 'changed']);
/** The fake release replies name the outcome the real reader would give. */
const releaseOutcome = (reply: unknown): ReleaseOutcome | undefined =>
  RELEASE_OUTCOMES.has(reply) ? (reply as ReleaseOutcome) : undefined;

// The renewal and force-release replies are the real ones, read by the real readers.
const protocol = {
  renew: (holds: readonly HeldLock[]) =>
    new ScriptCall(
      SCRIPTS.renew,
      holds.map((hold) => hold.key),
      [],
      renewedFlags(holds.length),
    ),
  release: (hold: HeldLock, expected: number) =>
    new ScriptCall(SCRIPTS.release, [hold.key], [String(expected)], releaseOutcome),
  abandon: (hold: HeldLock) => new ScriptCall(SCRIPTS.abandon, [hold.key], [], yesOrNo),
  forceRelease: (target: Target) => new ScriptCall(SCRIPTS.forceRelease, [target.key], [], yesOrNo),
} as unknown as Protocol;

const target = (name: string): Target => ({ name, key: `app:${name}`, channel: `unlock:${name}`, protocol });

/** The part of Calls the holds use: records each script call; renewals find every hold held. */
class FakeCalls {
  readonly timeoutMs = 500;
  readonly replication = undefined;
  connectionClosed = false;
  readonly sent: { script: string; keys: readonly string[]; args: readonly string[] }[] = [];
  /** The answer of each script by name; an Error fails the call. */
  readonly answers = new Map<string, unknown>([['release', 'freed']]);

  #send(call: ScriptCall): Promise<unknown> {
    this.sent.push({ script: call.script.name, keys: call.keys, args: call.args });
    const answer = call.script.name === 'renew' ? call.keys.map(() => 1) : this.answers.get(call.script.name);
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  }
  /** One try: its raw reply, no replica to count. */
  once(call: ScriptCall): Promise<Synced> {
    return this.#send(call).then((reply) => ({ reply, acknowledged: Number.POSITIVE_INFINITY }));
  }
  /** Tries again after a failure while `keepTrying` says so; then fails with the last error. */
  async idempotent(call: ScriptCall, keepTrying: (attempt: number) => boolean): Promise<unknown> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.#send(call);
      } catch (error) {
        if (!keepTrying(attempt)) throw error;
      }
    }
  }
  retry(error: unknown): Promise<Synced> {
    return Promise.reject(error);
  }
  scripts(name: string): string[][] {
    return this.sent.filter((call) => call.script === name).map((call) => [...call.keys]);
  }
}

interface Setup {
  readonly holds: Holds;
  readonly calls: FakeCalls;
  readonly lost: LockLostEvent[];
  readonly errors: Error[];
  closed: boolean;
}

function setup(): Setup {
  const calls = new FakeCalls();
  const emitter = new EventEmitter<LockClientEvents>();
  const lost: LockLostEvent[] = [];
  const errors: Error[] = [];
  emitter.on('lockLost', (event) => lost.push(event));
  emitter.on('error', (error) => errors.push(error));
  const made: Setup = { holds: undefined as unknown as Holds, calls, lost, errors, closed: false };
  const holds = new Holds(calls as unknown as Calls, new OperationChains(), new Events(emitter), {
    watchdogTimeoutMs: WATCHDOG_MS,
    longHoldWarningMs: 0,
    releaseRetryMs: 1_000,
    isClosed: () => made.closed,
    telemetry: NO_TELEMETRY,
  });
  return Object.assign(made, { holds });
}

/** A hold confirmed now: renewed by the watchdog, or with a lease of its own. */
function held(name: string, watchdog: boolean, count = 1): Hold {
  const hold = new Hold(target(name), `field-${name}`, watchdog ? WATCHDOG_MS : LEASE_MS, watchdog);
  hold.count = count;
  hold.extend(performance.now());
  return hold;
}

describe('Holds', () => {
  const made: Holds[] = [];
  function holdsOf(): Setup {
    const fresh = setup();
    made.push(fresh.holds);
    return fresh;
  }
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(async () => {
    for (const holds of made.splice(0)) await holds.closeAll();
    vi.useRealTimers();
  });

  it('renews every third of the watchdog timeout, and never faster than every 10 ms', () => {
    expect(holdsOf().holds.renewIntervalMs).toBe(1_000);
    const tiny = new Holds(
      new FakeCalls() as unknown as Calls,
      new OperationChains(),
      new Events(new EventEmitter<LockClientEvents>()),
      {
        watchdogTimeoutMs: 20,
        longHoldWarningMs: 0,
        releaseRetryMs: 1_000,
        isClosed: () => false,
        telemetry: NO_TELEMETRY,
      },
    );
    expect(tiny.renewIntervalMs).toBe(10);
  });

  it('keeps a re-entered hold until its last release, then forgets it', async () => {
    const { holds, calls } = holdsOf();
    calls.answers.set('release', 'partial');
    const orders = held('orders', true, 2);
    holds.add(orders);
    expect(orders.acquiredAt).toBe(performance.now());
    expect(holds.get(orders.chain)).toBe(orders);
    await holds.release(orders);
    expect(orders.count).toBe(1);
    expect(holds.has(orders.chain)).toBe(true);
    calls.answers.set('release', 'freed');
    await holds.release(orders);
    expect(orders.count).toBe(0);
    expect(holds.has(orders.chain)).toBe(false);
    expect(calls.scripts('release')).toEqual([['app:orders'], ['app:orders']]);
  });

  it('forgets a hold only if it is the one kept for its chain', () => {
    const { holds } = holdsOf();
    const first = held('orders', true);
    const second = held('orders', true);
    holds.add(first);
    holds.add(second);
    holds.forget(first);
    expect(holds.get(second.chain)).toBe(second);
    holds.forget(second);
    expect(holds.has(second.chain)).toBe(false);
  });

  it('renews a watchdog hold in time, so it outlives its lease many times over', async () => {
    const { holds, calls, lost } = holdsOf();
    const orders = held('orders', true);
    holds.add(orders);
    await vi.advanceTimersByTimeAsync(5 * WATCHDOG_MS);
    expect(calls.scripts('renew')).toHaveLength(15);
    expect(lost).toEqual([]);
    expect(orders.signal.aborted).toBe(false);
  });

  it('declares a hold nothing renews lost at its deadline, not before, and drops it in Redis', async () => {
    const { holds, calls, lost } = holdsOf();
    const orders = held('orders', false);
    holds.add(orders);
    const signal = orders.signal;
    await vi.advanceTimersByTimeAsync(orders.deadline - performance.now() - 1);
    expect(lost).toEqual([]);
    expect(calls.scripts('abandon')).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(lost.map((event) => [event.name, event.error.reason])).toEqual([['orders', 'expired']]);
    expect(lost[0]?.error.message).toBe(
      'Lock "orders" was lost: no renewal was confirmed within its 1000 ms lease',
    );
    expect(signal.reason).toBe(lost[0]?.error);
    expect(holds.has(orders.chain)).toBe(false);
    expect(calls.scripts('abandon')).toEqual([['app:orders']]);
    expect(calls.scripts('renew')).toEqual([]);
  });

  it('declares a loss once, and hands back the first error after that', () => {
    const { holds, lost } = holdsOf();
    const orders = held('orders', true);
    holds.add(orders);
    const first = holds.markLost(orders, 'not-owner', 'Lock "orders" was lost: it expired or was taken over');
    const second = holds.markLost(orders, 'expired', 'Lock "orders" was lost again');
    expect(second).toBe(first);
    expect(first.reason).toBe('not-owner');
    expect(lost).toEqual([{ name: 'orders', key: 'app:orders', error: first }]);
    expect(orders.signal.reason).toBe(first);
    expect(holds.has(orders.chain)).toBe(false);
  });

  it('declares a hold given up elsewhere lost at once, and leaves the others', () => {
    const { holds, lost } = holdsOf();
    const orders = held('orders', true);
    const invoices = held('invoices', true);
    holds.add(orders);
    holds.add(invoices);
    holds.releasedElsewhere('app:orders', 'field-orders', 'Permit of "orders" was released by its id');
    holds.releasedElsewhere('app:orders', 'field-someone-else', 'not ours');
    expect(lost.map((event) => [event.name, event.error.reason, event.error.message])).toEqual([
      ['orders', 'not-owner', 'Permit of "orders" was released by its id'],
    ]);
    expect(holds.has(invoices.chain)).toBe(true);
  });

  it("force-unlocks a lock, tells this client's holders of it at once, and says whether there was one", async () => {
    const { holds, calls, lost } = holdsOf();
    const orders = held('orders', true);
    const invoices = held('invoices', true);
    holds.add(orders);
    holds.add(invoices);
    calls.answers.set('force-release', 1);
    await expect(holds.forceUnlock(target('orders'))).resolves.toBe(true);
    expect(calls.scripts('force-release')).toEqual([['app:orders']]);
    expect(lost.map((event) => [event.name, event.error.reason])).toEqual([['orders', 'force-unlocked']]);
    expect(holds.has(invoices.chain)).toBe(true);
    calls.answers.set('force-release', 0);
    await expect(holds.forceUnlock(target('orders'))).resolves.toBe(false);
  });

  it('rejects a force-unlock Redis failed with REDIS_ERROR, and one on a closed client before sending', async () => {
    const setupFailed = holdsOf();
    setupFailed.calls.answers.set('force-release', new Error('connection reset'));
    const error = await setupFailed.holds.forceUnlock(target('orders')).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(LockError);
    expect((error as LockError).code).toBe('REDIS_ERROR');
    expect((error as Error).message).toBe(
      'Redis failed while force-unlocking lock "orders": connection reset',
    );

    const closed = holdsOf();
    closed.closed = true;
    await expect(closed.holds.forceUnlock(target('orders'))).rejects.toBeInstanceOf(ClientClosedError);
    expect(closed.calls.sent).toEqual([]);
  });

  it('gives every hold up on close: lost, dropped in Redis with one try each, and renewed no more', async () => {
    const { holds, calls, lost } = holdsOf();
    calls.answers.set('abandon', new Error('connection reset'));
    const orders = held('orders', true);
    const invoices = held('invoices', false);
    holds.add(orders);
    holds.add(invoices);
    await holds.closeAll();
    expect(lost.map((event) => [event.name, event.error.reason])).toEqual([
      ['orders', 'client-closed'],
      ['invoices', 'client-closed'],
    ]);
    expect(calls.scripts('abandon')).toEqual([['app:orders'], ['app:invoices']]);
    await vi.advanceTimersByTimeAsync(3 * WATCHDOG_MS);
    expect(calls.scripts('renew')).toEqual([]);
    expect(lost).toHaveLength(2);
  });

  it('says once, loudly, that the Redis client was closed under held locks, naming no owner', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const { holds, lost, errors } = holdsOf();
      holds.clientClosed();
      expect(errors).toEqual([]);
      for (const name of ['a', 'b', 'c', 'd', 'e', 'f', 'g']) holds.add(held(name, true));
      holds.clientClosed();
      expect(lost).toHaveLength(7);
      expect(lost.every((event) => event.error.reason === 'client-closed')).toBe(true);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toBeInstanceOf(ClientClosedError);
      const message = errors[0]?.message ?? '';
      expect(message).toContain('while it held 7 lock(s) ("a", "b", "c", "d", "e", and 2 more)');
      expect(message).toContain('within 3000 ms');
      expect(message).not.toContain('field-');
      expect(warn).toHaveBeenCalledTimes(1);
      holds.add(held('h', true));
      holds.clientClosed();
      expect(lost).toHaveLength(8);
      expect(errors).toHaveLength(1);
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });
});

describe('Holds on a blocked event loop', () => {
  it('reports a hold lost the moment its deadline passed, before the expiry timer could run', async () => {
    const { holds, lost } = setup();
    const orders = new Hold(target('orders'), 'field-orders', 40, false);
    orders.count = 1;
    orders.extend(performance.now());
    holds.add(orders);
    const signal = orders.signal;
    // Blocks this thread past the deadline: no timer runs until the test yields.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60);
    expect(lost).toEqual([]);
    expect(signal.aborted).toBe(true);
    expect(lost.map((event) => [event.name, event.error.reason])).toEqual([['orders', 'expired']]);
    await holds.closeAll();
  });
});
