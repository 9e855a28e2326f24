// The watchdog's renewal of one batch, against fake parts (no Redis): a renewed hold's lease runs
// from the call's send, a hold the reply says is gone is lost, a renewal too few replicas
// acknowledged extends nothing and is reported, and a closed Redis client sends nothing.
import { EventEmitter } from 'eventemitter3';
import { describe, expect, it } from 'vitest';
import type { LockLostError, LockLostReason } from '../../src/errors.js';
import type { Calls, Synced } from '../../src/engine/calls.js';
import { Events } from '../../src/engine/events.js';
import { Hold } from '../../src/engine/holds/hold.js';
import { Renewal, type RenewedHolds } from '../../src/engine/holds/renewal.js';
import type { Watchdog } from '../../src/engine/holds/watchdog.js';
import { NO_TELEMETRY } from '../../src/engine/telemetry.js';
import { renewedFlags } from '../../src/engine/replies.js';
import { ScriptCall } from '../../src/engine/script-call.js';
import type { HeldLock, Protocol, Target } from '../../src/engine/types.js';
import type { LockClientEvents } from '../../src/options.js';
import { luaScripts } from '../../src/scripts/generated.js';

const LEASE_MS = 30_000;

interface Setup {
  readonly renewal: Renewal;
  readonly holds: Hold[];
  readonly lost: { name: string; reason: LockLostReason }[];
  readonly touched: Hold[];
  readonly emitter: EventEmitter<LockClientEvents>;
  readonly sent: number[];
  clientClosed: number;
}

function setup(
  reply: unknown,
  options: { acknowledged?: number; required?: number; closed?: boolean } = {},
): Setup {
  const protocol = {
    renew: (holds: readonly HeldLock[]) =>
      new ScriptCall(
        luaScripts['lock/renew'],
        holds.map((hold) => hold.key),
        [],
        renewedFlags(holds.length),
      ),
  } as unknown as Protocol;
  const target = (name: string): Target => ({
    name,
    key: `lock:${name}`,
    channel: `unlock:${name}`,
    protocol,
  });
  const holds = ['orders', 'invoices'].map((name) => {
    const hold = new Hold(target(name), `field-${name}`, LEASE_MS, true);
    hold.count = 1;
    hold.extend(0);
    return hold;
  });
  const byChain = new Map(holds.map((hold) => [hold.chain, hold]));
  const sent: number[] = [];
  const calls = {
    connectionClosed: options.closed === true,
    timeoutMs: 1_000,
    replication: options.required === undefined ? undefined : { count: options.required, timeoutMs: 100 },
    once: (): Promise<Synced> => {
      sent.push(performance.now());
      return Promise.resolve({ reply, acknowledged: options.acknowledged ?? Number.POSITIVE_INFINITY });
    },
  } as unknown as Calls;
  const touched: Hold[] = [];
  const watchdog = { touched: (hold: Hold) => touched.push(hold), retryDelayMs: 250 } as unknown as Watchdog;
  const emitter = new EventEmitter<LockClientEvents>();
  const lost: { name: string; reason: LockLostReason }[] = [];
  const result: Setup = {
    renewal: undefined as unknown as Renewal,
    holds,
    lost,
    touched,
    emitter,
    sent,
    clientClosed: 0,
  };
  const renewed: RenewedHolds = {
    get: (chain) => byChain.get(chain),
    markLost: (hold, reason) => {
      lost.push({ name: hold.name, reason });
      byChain.delete(hold.chain);
      return undefined as unknown as LockLostError;
    },
    clientClosed: () => {
      result.clientClosed += 1;
    },
  };
  const renewal = new Renewal(
    {
      calls,
      events: new Events(emitter),
      watchdog,
      telemetry: NO_TELEMETRY,
      watchdogTimeoutMs: LEASE_MS,
      renewIntervalMs: LEASE_MS / 3,
      longHoldWarningMs: 0,
      isClosed: () => false,
    },
    renewed,
  );
  return Object.assign(result, { renewal });
}

describe('Renewal', () => {
  it('extends a renewed hold from the send of the call, and declares one the reply says is gone lost', async () => {
    const { renewal, holds, lost, touched, sent } = setup([true, false]);
    const [orders, invoices] = holds as [Hold, Hold];
    await expect(renewal.renewAll(holds)).resolves.toBe(true);
    expect(sent).toHaveLength(1);
    expect(orders.validUntil).toBeGreaterThanOrEqual(LEASE_MS + 1);
    expect(orders.validUntil).toBeLessThanOrEqual((sent[0] ?? 0) + LEASE_MS);
    expect(touched).toEqual([orders]);
    expect(lost).toEqual([{ name: 'invoices', reason: 'not-owner' }]);
    expect(invoices.validUntil).toBe(LEASE_MS);
  });

  it('extends nothing when too few replicas acknowledged, and reports the holds in renewFailed', async () => {
    const { renewal, holds, lost, touched, emitter } = setup([true, true], { acknowledged: 0, required: 1 });
    const failed: { names: readonly string[]; retryInMs: number }[] = [];
    emitter.on('renewFailed', (event) => failed.push({ names: event.names, retryInMs: event.retryInMs }));
    await expect(renewal.renewAll(holds)).resolves.toBe(false);
    expect(failed).toEqual([{ names: ['orders', 'invoices'], retryInMs: 250 }]);
    expect(touched).toEqual([]);
    expect(lost).toEqual([]);
    expect(holds.map((hold) => hold.validUntil)).toEqual([LEASE_MS, LEASE_MS]);
  });

  it('reports a reply it cannot read on `error`, and sends nothing once the Redis client is closed', async () => {
    const unreadable = setup('OK');
    const errors: Error[] = [];
    unreadable.emitter.on('error', (error) => errors.push(error));
    await expect(unreadable.renewal.renewAll(unreadable.holds)).resolves.toBe(false);
    expect(errors.map((error) => error.message)).toEqual([
      'Unexpected reply from Redis to script "lock/renew": a string',
    ]);
    expect(unreadable.lost).toEqual([]);

    const closed = setup([true, true], { closed: true });
    await expect(closed.renewal.renewAll(closed.holds)).resolves.toBe(true);
    expect(closed.sent).toEqual([]);
    expect(closed.clientClosed).toBe(1);
  });
});
