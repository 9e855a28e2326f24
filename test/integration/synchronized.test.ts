/**
 * The `@synchronized` method decorator (TypeScript 5 standard decorators): calls on one lock
 * name exclude each other, calls on different names do not, a nested call re-enters, errors
 * pass through and the lock is released, every kind works, and bad arguments are refused when
 * the decorator is applied.
 */
import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockReentryError,
  synchronized,
  type LockClient,
  type SynchronizedKind,
} from '../../src/index.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep } from '../support/wait.js';

/** Tracks how many calls are inside at once, per name. */
class Meter {
  readonly inside = new Map<string, number>();
  readonly most = new Map<string, number>();
  async visit(name: string, ms: number): Promise<void> {
    const now = (this.inside.get(name) ?? 0) + 1;
    this.inside.set(name, now);
    this.most.set(name, Math.max(this.most.get(name) ?? 0, now));
    await sleep(ms);
    this.inside.set(name, (this.inside.get(name) ?? 1) - 1);
  }
}

function ledgerOf(locks: LockClient, kind: SynchronizedKind, meter: Meter) {
  class Ledger {
    readonly locks = locks;
    @synchronized<Ledger, [string, number], string>((self) => self.locks, (account) => `ledger:${account}`, {
      kind,
      waitMs: 5_000,
    })
    async post(account: string, cents: number): Promise<string> {
      await meter.visit(account, 20);
      return `${account}:${cents}`;
    }

    @synchronized<Ledger, [string], string>(locks, (account) => `ledger:${account}`, { kind })
    async close(account: string): Promise<string> {
      // Re-enters the lock this call holds (reentrant kinds only).
      return this.post(account, 0);
    }

    @synchronized<Ledger, [], never>(locks, 'ledger:broken', { kind })
    async fail(): Promise<never> {
      await sleep(1);
      throw new Error('the ledger is read-only');
    }
  }
  return new Ledger();
}

describe('@synchronized', () => {
  const { lockClient } = sharedSuite('synchronized');

  for (const kind of ['lock', 'fencedLock', 'simpleLock'] as const) {
    it(`${kind}: calls on one name run one at a time, other names alongside`, async () => {
      const meter = new Meter();
      const ledger = ledgerOf(lockClient(), kind, meter);
      const results = await Promise.all([
        ledger.post('acme', 1),
        ledger.post('acme', 2),
        ledger.post('acme', 3),
        ledger.post('globex', 4),
      ]);
      expect(results.sort()).toEqual(['acme:1', 'acme:2', 'acme:3', 'globex:4']);
      expect(meter.most.get('acme')).toBe(1);
      expect(meter.most.get('globex')).toBe(1);
    });

    it(`${kind}: an error passes through and the lock is free afterwards`, async () => {
      const locks = lockClient();
      const ledger = ledgerOf(locks, kind, new Meter());
      const outcome = await settle(ledger.fail());
      expect((outcome.error as Error).message).toBe('the ledger is read-only');
      const handle = kind === 'simpleLock' ? locks.simpleLock('ledger:broken') : locks[kind]('ledger:broken');
      expect(await handle.isLocked()).toBe(false);
    });
  }

  it('a nested call re-enters a reentrant lock, and is refused at once by a simple lock', async () => {
    expect(await ledgerOf(lockClient(), 'lock', new Meter()).close('acme')).toBe('acme:0');
    expect(await ledgerOf(lockClient(), 'fencedLock', new Meter()).close('acme')).toBe('acme:0');
    const outcome = await settle(ledgerOf(lockClient(), 'simpleLock', new Meter()).close('acme'));
    expect(outcome.error).toBeInstanceOf(LockReentryError);
  });

  it('refuses bad arguments when applied, and a bad lock name on the call', async () => {
    const locks = lockClient();
    expect(() => synchronized(null as never, 'x')).toThrow(InvalidArgumentError);
    expect(() => synchronized(locks, 42 as never)).toThrow(InvalidArgumentError);
    expect(() => synchronized(locks, 'x', { kind: 'mutex' as never })).toThrow(InvalidArgumentError);
    expect(() => synchronized(locks, 'x', { kind: 'simpleLock', reentrant: true })).toThrow(
      InvalidArgumentError,
    );
    expect(() => synchronized(locks, 'x', { timeout: 5 } as never)).toThrow(InvalidArgumentError);

    class Shipping {
      @synchronized<Shipping, [string], void>(locks, (id) => id)
      async ship(id: string): Promise<void> {
        await sleep(id.length);
      }
    }
    expect((await settle(new Shipping().ship(''))).error).toBeInstanceOf(InvalidArgumentError);
  });
});
