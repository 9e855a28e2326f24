// A kind's handle over a fake engine (no Redis): options checked and a closed client or an
// aborted signal refused before the engine is asked; a reentrant lock taken again from its own
// async context asks as the same owner, and a non-reentrant one is refused inside its own
// `withLock` callback while side-by-side callbacks of the same context still queue for it.
import { describe, expect, it } from 'vitest';
import { ClientClosedError, InvalidArgumentError, LockReentryError } from '../../../src/errors.js';
import type { Engine } from '../../../src/engine/engine.js';
import { CONTEXT_OWNERS, LockHandle, type OwnerPolicy } from '../../../src/engine/handle.js';
import { Hold } from '../../../src/engine/holds/hold.js';
import { plainLease, type Lease, type LeaseFactory } from '../../../src/engine/lease.js';
import type { Protocol, Target } from '../../../src/engine/types.js';
import { runInContext } from '../../../src/owner.js';

const TARGET: Target = {
  name: 'orders',
  key: 'app:orders',
  channel: 'unlock:orders',
  protocol: {} as Protocol,
};

interface Asked {
  readonly field: string;
  readonly waitMs: number;
  readonly leaseMs: number | undefined;
  readonly throwOnTimeout: boolean;
}

/** The part of the engine a handle uses: every acquire is granted at once and recorded. */
class FakeEngine {
  readonly clientId = 'client-uuid';
  closed = false;
  readonly asked: Asked[] = [];
  assertOpen(): void {
    if (this.closed) throw new ClientClosedError();
  }
  acquire(
    target: Target,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    _signal: AbortSignal | undefined,
    newLease: LeaseFactory<Lease>,
    throwOnTimeout = false,
  ): Promise<Lease | null> {
    this.asked.push({ field, waitMs, leaseMs, throwOnTimeout });
    const hold = new Hold(target, field, leaseMs ?? 30_000, leaseMs === undefined);
    hold.count = 1;
    hold.extend(performance.now());
    return Promise.resolve(newLease(hold, { release: () => Promise.resolve() }, undefined));
  }
}

class OrdersLock extends LockHandle<Lease> {
  constructor(engine: FakeEngine, owners: OwnerPolicy) {
    super(engine as unknown as Engine, TARGET, owners, plainLease);
  }
  heldHere(): boolean | undefined {
    return this.heldByContext();
  }
}

function handle(owners: OwnerPolicy): { lock: OrdersLock; engine: FakeEngine } {
  const engine = new FakeEngine();
  return { lock: new OrdersLock(engine, owners), engine };
}

describe('LockHandle', () => {
  it('waits forever and throws on timeout by default for acquire, and tries once for tryAcquire', async () => {
    const { lock, engine } = handle(CONTEXT_OWNERS.reentrant);
    await lock.acquire();
    await lock.tryAcquire({ leaseMs: 2_000 });
    expect(
      engine.asked.map(({ waitMs, leaseMs, throwOnTimeout }) => [waitMs, leaseMs, throwOnTimeout]),
    ).toEqual([
      [Number.POSITIVE_INFINITY, undefined, true],
      [0, 2_000, false],
    ]);
  });

  it('refuses bad options, a bad callback, a closed client and an aborted signal before asking the engine', async () => {
    const { lock, engine } = handle(CONTEXT_OWNERS.reentrant);
    await expect(lock.acquire({ waitMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(lock.withLock(() => undefined, { leaseMs: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(lock.withLock('ship' as unknown as () => void)).rejects.toBeInstanceOf(InvalidArgumentError);
    const reason = new Error('shutting down');
    await expect(lock.acquire({ signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    engine.closed = true;
    await expect(lock.tryAcquire()).rejects.toBeInstanceOf(ClientClosedError);
    expect(engine.asked).toEqual([]);
  });

  it('asks as the same owner when a reentrant lock is taken again from its own async context', async () => {
    const { lock, engine } = handle(CONTEXT_OWNERS.reentrant);
    await lock.withLock(async () => {
      const again = await lock.acquire();
      await again.release();
    });
    const [outer, inner] = engine.asked;
    expect(engine.asked).toHaveLength(2);
    expect(inner?.field).toBe(outer?.field);
    expect(outer?.field.startsWith('client-uuid:')).toBe(true);
    // Another async context is another owner.
    await lock.withLock(() => undefined);
    expect(engine.asked[2]?.field).not.toBe(outer?.field);
  });

  it('refuses a non-reentrant lock taken again inside its own withLock callback, without asking the engine', async () => {
    const { lock, engine } = handle(CONTEXT_OWNERS.exclusive);
    let refused: unknown;
    await lock.withLock(async () => {
      expect(lock.heldHere()).toBe(true);
      refused = await lock.acquire().catch((error: unknown) => error);
      await expect(lock.tryAcquire()).rejects.toBeInstanceOf(LockReentryError);
      await expect(lock.withLock(() => undefined)).rejects.toBeInstanceOf(LockReentryError);
    });
    expect(refused).toBeInstanceOf(LockReentryError);
    expect((refused as LockReentryError).message).toBe(
      'Lock "orders" is not reentrant and is already held by this async context; taking it again would wait for itself',
    );
    expect(engine.asked).toHaveLength(1);
    expect(lock.heldHere()).toBe(false);
  });

  it('lets side-by-side callbacks of one async context take a non-reentrant lock, each as an owner of its own', async () => {
    const { lock, engine } = handle(CONTEXT_OWNERS.exclusive);
    const context = { ownerId: '5', nonReentrant: new Set<string>() };
    await runInContext(context, () => Promise.all([lock.withLock(() => 'a'), lock.withLock(() => 'b')]));
    expect(engine.asked).toHaveLength(2);
    expect(engine.asked[0]?.field).not.toBe(engine.asked[1]?.field);
  });

  it('refuses only the lock held: another non-reentrant lock may be taken inside the callback', async () => {
    const { lock, engine } = handle(CONTEXT_OWNERS.exclusive);
    const invoices = new (class extends LockHandle<Lease> {
      constructor() {
        super(
          engine as unknown as Engine,
          { ...TARGET, name: 'invoices', key: 'app:invoices' },
          CONTEXT_OWNERS.exclusive,
          plainLease,
        );
      }
    })();
    await lock.withLock(async () => {
      await invoices.withLock(() => undefined);
    });
    expect(engine.asked).toHaveLength(2);
    expect(lock.reentrant).toBe(false);
  });

  it('counts a reentrant lock in Redis, not in the async context', async () => {
    const { lock } = handle(CONTEXT_OWNERS.reentrant);
    await lock.withLock(() => {
      expect(lock.heldHere()).toBeUndefined();
    });
    expect(lock.reentrant).toBe(true);
  });
});
