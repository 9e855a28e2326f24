/**
 * The permit semaphore (Redisson's RPermitExpirableSemaphore layout): permits taken by id, each
 * with a lease the watchdog renews while its holder lives; released by lease or by id from any
 * client; expired permits given back by whichever script runs next; loss reported as for a lock.
 */
import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockLostError,
  LockNotOwnedError,
  LockReentryError,
  LockTimeoutError,
  type LockClient,
  type PermitLease,
  type PermitSemaphore,
} from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { commandsFrom } from '../support/monitor.js';
import { sharedSuite, type SharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

/** Names spelt out here rather than taken from src/keys.ts, so a renamed one fails the tests. */
function timeoutKeyOf(key: string): string {
  return `{${key}}:timeout`;
}
function channelOf(key: string): string {
  return `redisson_sc:{${key}}`;
}

/** A LockClient on a connection of its own, sharing the key prefix of `semaphore`'s client. */
async function otherClient(res: SharedSuite['res'], semaphore: PermitSemaphore): Promise<LockClient> {
  return res.lockClient({ keyPrefix: semaphore.key.slice(0, -semaphore.name.length) });
}

/** Every event a client emits, as text, to look for secrets in. */
function recordEvents(locks: LockClient): string[] {
  const seen: string[] = [];
  for (const name of ['acquired', 'released', 'lockLost', 'renewFailed', 'error', 'leaseHeldLong'] as const) {
    locks.on(name, (event: unknown) => {
      const error = (event as { error?: unknown }).error ?? (event instanceof Error ? event : undefined);
      seen.push(
        JSON.stringify(event),
        error instanceof Error ? `${error.message} ${String(error.cause)}` : '',
      );
    });
  }
  return seen;
}

describe('PermitSemaphore', () => {
  const suite = sharedSuite('permit');
  const { res, lockClient } = suite;

  it('hands out P permits at once under Redisson ids; the P+1-th waits', async () => {
    const semaphore = lockClient({ watchdogTimeoutMs: 5_000 }).permitSemaphore('crawl:hosts', { permits: 3 });
    const leases = await Promise.all([semaphore.acquire(), semaphore.acquire(), semaphore.acquire()]);
    expect(new Set(leases.map((lease) => lease.permitId)).size).toBe(3);
    for (const lease of leases) expect(lease.permitId).toMatch(/^[0-9a-f]{32}$/);

    const admin = suite.admin;
    expect(await admin.get(semaphore.key)).toBe('0');
    expect(await admin.pTTL(semaphore.key)).toBe(-1);
    expect(await admin.zCard(timeoutKeyOf(semaphore.key))).toBe(3);
    // Members are the ids' 16 bytes, as Redisson stores its own.
    const member = Buffer.from(leases[0]?.permitId ?? '', 'hex');
    expect(member).toHaveLength(16);
    const score = await admin.sendCommand(['ZSCORE', timeoutKeyOf(semaphore.key), member]);
    expect(score).not.toBeNull();
    const [seconds] = await admin.time();
    expect(Number(score) - Number(seconds) * 1_000).toBeGreaterThan(4_000);
    expect(await semaphore.availablePermits()).toBe(0);
    expect(await semaphore.isLocked()).toBe(true);

    expect(await semaphore.tryAcquire()).toBeNull();
    const fourth = semaphore.acquire({ waitMs: 5_000 });
    await sleep(150);
    expect((await Promise.race([fourth.then(() => 'took'), sleep(0).then(() => 'waits')])) === 'waits').toBe(
      true,
    );
    await leases[1]?.release();
    const lease = await fourth;
    expect(await semaphore.availablePermits()).toBe(0);
    await Promise.all([lease.release(), leases[0]?.release(), leases[2]?.release()]);
    expect(await semaphore.availablePermits()).toBe(3);
    expect(await semaphore.remainingTtlMs()).toBeNull();
    expect(await admin.exists(timeoutKeyOf(semaphore.key))).toBe(0);
  });

  it('wakes a waiting client within milliseconds of a release, with the count of free permits', async () => {
    const holder = lockClient().permitSemaphore('exports:pdf', { permits: 1 });
    const waiter = (await otherClient(res, holder)).permitSemaphore('exports:pdf', { permits: 1 });
    const messages: string[] = [];
    const subscriber = await res.connect();
    await subscriber.subscribe(channelOf(holder.key), (message) => messages.push(message));
    const held = await holder.acquire();
    const waiting = waiter.acquire({ waitMs: 10_000 });
    await waitUntil('the waiter is subscribed', async () => (await res.numsub(channelOf(holder.key))) >= 2);
    await sleep(100);
    const releasedAt = performance.now();
    await held.release();
    const taken = await waiting;
    expect(performance.now() - releasedAt).toBeLessThan(500);
    expect(messages).toContain('1');
    await taken.release();
  });

  it('releases a permit by id from another client; its holder learns of it at its next renewal', async () => {
    const owner = lockClient({ watchdogTimeoutMs: 300 });
    const events = recordEvents(owner);
    const semaphore = owner.permitSemaphore('jobs:render', { permits: 2 });
    const lease = await semaphore.acquire();
    const other = (await otherClient(res, semaphore)).permitSemaphore('jobs:render');

    expect(await other.release(lease.permitId)).toBe(true);
    expect(await other.availablePermits()).toBe(2);
    // Given back once: a second release by id finds nothing.
    expect(await other.release(lease.permitId)).toBe(false);
    expect(await other.availablePermits()).toBe(2);

    await waitUntil('the lease reports its loss', () => lease.signal.aborted, 3_000);
    expect(lease.signal.reason).toBeInstanceOf(LockLostError);
    expect((lease.signal.reason as LockLostError).reason).toBe('not-owner');
    const released = await settle(lease.release());
    expect(released.error).toBeInstanceOf(LockNotOwnedError);
    expect(await other.availablePermits()).toBe(2);
    for (const text of [...events, String(released.error), String((released.error as Error).cause)]) {
      expect(text).not.toContain(lease.permitId);
    }
    expect(events.some((text) => text.includes('lockLost') || text.includes('not-owner'))).toBe(true);
  });

  it('keeps a permit while its holder lives: the watchdog renews it across many leases', async () => {
    const semaphore = lockClient({ watchdogTimeoutMs: 300 }).permitSemaphore('reports:nightly', {
      permits: 1,
    });
    const lease = await semaphore.acquire();
    await sleep(1_500);
    expect(lease.signal.aborted).toBe(false);
    expect(await semaphore.availablePermits()).toBe(0);
    const ttl = await semaphore.remainingTtlMs();
    expect(ttl !== null && ttl > 0 && ttl <= 300).toBe(true);
    await lease.release();
    expect(await semaphore.availablePermits()).toBe(1);
  });

  it('lets a permit with an explicit leaseMs expire, and gives it to a waiter by the earliest-expiry bound', async () => {
    const semaphore = lockClient({ watchdogTimeoutMs: 5_000 }).permitSemaphore('invoices:batch', {
      permits: 1,
    });
    const lease = await semaphore.acquire({ leaseMs: 400 });
    const startedAt = performance.now();
    // Nothing publishes when a lease ends: the waiter re-checks when the earliest lease ends.
    const next = await semaphore.acquire({ waitMs: 5_000 });
    const waited = performance.now() - startedAt;
    expect(waited).toBeGreaterThan(250);
    expect(waited).toBeLessThan(1_500);
    expect(next.permitId).not.toBe(lease.permitId);
    const late = await settle(lease.release());
    expect(late.error).toBeInstanceOf(LockNotOwnedError);
    expect(await semaphore.availablePermits()).toBe(0);
    await next.release();
    expect(await semaphore.availablePermits()).toBe(1);
  });

  it('does not lose a crashed holder’s permit when nobody touches the semaphore for longer than a lease', async () => {
    const semaphore = lockClient().permitSemaphore('quotes:refresh', { permits: 2 });
    await semaphore.acquire({ leaseMs: 150 });
    await sleep(1_000);
    expect(await semaphore.availablePermits()).toBe(2);
  });

  it('reports loss on the lease signal when its permit is removed behind its back', async () => {
    const locks = lockClient({ watchdogTimeoutMs: 300 });
    const lost: string[] = [];
    locks.on('lockLost', (event) => lost.push(event.error.reason));
    const semaphore = locks.permitSemaphore('ledger:close', { permits: 1 });
    const lease = await semaphore
      .withLock(async (held) => {
        await suite.admin.del(timeoutKeyOf(semaphore.key));
        await waitUntil('the loss is reported', () => held.signal.aborted, 3_000);
        return held;
      })
      .catch((error: unknown) => error);
    expect(lease).toBeInstanceOf(LockLostError);
    expect(lost).toEqual(['not-owner']);
  });

  it('ends a wait promptly on waitMs or abort, with no permit lost or gained', async () => {
    const semaphore = lockClient().permitSemaphore('payments:settle', { permits: 1 });
    const held = await semaphore.acquire();

    let startedAt = performance.now();
    const timedOut = await settle(semaphore.acquire({ waitMs: 200 }));
    expect(timedOut.error).toBeInstanceOf(LockTimeoutError);
    expect(performance.now() - startedAt).toBeLessThan(1_000);

    const controller = new AbortController();
    startedAt = performance.now();
    const aborted = semaphore.acquire({ signal: controller.signal });
    setTimeout(() => controller.abort(new Error('shutting down')), 100);
    const outcome = await settle(aborted);
    expect((outcome.error as Error).message).toBe('shutting down');
    expect(performance.now() - startedAt).toBeLessThan(1_000);

    expect(await suite.admin.get(semaphore.key)).toBe('0');
    expect(await suite.admin.zCard(timeoutKeyOf(semaphore.key))).toBe(1);
    await held.release();
    expect(await semaphore.availablePermits()).toBe(1);
    expect(await suite.admin.zCard(timeoutKeyOf(semaphore.key))).toBe(0);
  });

  it('sets and adds permits once per call, and wakes waiters', async () => {
    const locks = lockClient();
    const semaphore = locks.permitSemaphore('renders:gpu');
    expect(await semaphore.availablePermits()).toBe(0);
    expect(await semaphore.tryAcquire()).toBeNull();
    const waiting = semaphore.acquire({ waitMs: 5_000 });
    await sleep(100);
    expect(await semaphore.trySetPermits(1)).toBe(true);
    const lease = await waiting;
    expect(await semaphore.trySetPermits(5)).toBe(false);
    expect(await semaphore.addPermits(2)).toBe(2);
    expect(await semaphore.addPermits(-1)).toBe(1);
    await lease.release();
    expect(await semaphore.availablePermits()).toBe(2);
    // A semaphore made with `permits` starts from them, whichever call comes first.
    const seeded = locks.permitSemaphore('renders:cpu', { permits: 4 });
    expect(await seeded.addPermits(1)).toBe(5);
  });

  it.each([
    ['counts the permits', (seeded: PermitSemaphore) => seeded.availablePermits(), '2'],
    ['takes a permit', (seeded: PermitSemaphore) => seeded.acquire(), '1'],
  ] as const)(
    'wakes a waiter on a missing counter when another client with `permits` %s and so creates it',
    async (_, create, announced) => {
      const waiter = lockClient().permitSemaphore('renders:tpu');
      const seeded = (await otherClient(res, waiter)).permitSemaphore('renders:tpu', { permits: 2 });
      const messages: string[] = [];
      const subscriber = await res.connect();
      await subscriber.subscribe(channelOf(waiter.key), (message) => messages.push(message));
      // No counter and no permits known: the waiter has no lease to wait for, only the channel.
      const waiting = settle(waiter.acquire({ waitMs: 5_000 }));
      await waitUntil('the waiter is subscribed', async () => (await res.numsub(channelOf(waiter.key))) >= 2);
      await sleep(100);
      const createdAt = performance.now();
      await create(seeded);
      const { value: lease, error } = await waiting;
      expect(error).toBeUndefined();
      // Told at once, not at the end of its wait (before the counter announced itself it timed out).
      expect(performance.now() - createdAt).toBeLessThan(1_500);
      // The count left free, which Redisson's waiters read as how many of them may go.
      expect(messages[0]).toBe(announced);
      await lease?.release();
    },
  );

  it('takes a permit per acquire, but refuses one from inside its own withLock', async () => {
    const semaphore = lockClient().permitSemaphore('mail:send', { permits: 3 });
    const [first, second] = await Promise.all([semaphore.acquire(), semaphore.acquire()]);
    expect(first.permitId).not.toBe(second.permitId);
    await semaphore.withLock(async (lease: PermitLease) => {
      expect(lease.permitId).toMatch(/^[0-9a-f]{32}$/);
      expect(await semaphore.availablePermits()).toBe(0);
      // It would wait for itself when the permits run out: refused at once instead.
      await expect(semaphore.acquire()).rejects.toBeInstanceOf(LockReentryError);
      await expect(semaphore.withLock(() => 1)).rejects.toBeInstanceOf(LockReentryError);
    });
    await Promise.all([first.release(), second.release()]);
    expect(await semaphore.availablePermits()).toBe(3);
  });

  it('gives every permit back on forceUnlock and tells this client’s holders', async () => {
    const semaphore = lockClient().permitSemaphore('imports:csv', { permits: 2 });
    const [a, b] = await Promise.all([semaphore.acquire(), semaphore.acquire()]);
    expect(await semaphore.forceUnlock()).toBe(true);
    expect(a.signal.aborted && b.signal.aborted).toBe(true);
    expect(await semaphore.availablePermits()).toBe(2);
    expect(await semaphore.forceUnlock()).toBe(false);
  });

  it('takes one permit for an acquire request however often it arrives, and none once it is cancelled', async () => {
    const semaphore = lockClient().permitSemaphore('orders:export', { permits: 2 });
    const admin = suite.admin;
    const key = semaphore.key;
    const permitId = 'c0ffee'.padEnd(32, '7');
    const requestKey = `latchkey_request:{${key}}:replayed`;
    const acquire = (id: string, request: string): Promise<unknown> =>
      admin.eval(luaScripts['permit-semaphore/acquire'].source, {
        keys: [key, request, timeoutKeyOf(key)],
        arguments: [channelOf(key), id, '5000', '2'],
      });
    // The same request twice (a retry after a reply was lost): one permit, its lease set again.
    expect(await acquire(permitId, requestKey)).toBeNull();
    expect(await acquire(permitId, requestKey)).toBeNull();
    expect(await admin.get(key)).toBe('1');
    expect(await admin.zCard(timeoutKeyOf(key))).toBe(1);

    // Given up with its outcome unknown: the permit comes back, and a late copy is refused.
    const cancelled = await admin.eval(luaScripts['permit-semaphore/cancel-acquire'].source, {
      keys: [key, requestKey, timeoutKeyOf(key)],
      arguments: [channelOf(key), permitId, '60000'],
    });
    expect(cancelled).toBe(1);
    expect(await acquire(permitId, requestKey)).toBe(-3);
    expect(await admin.get(key)).toBe('2');
    expect(await admin.zCard(timeoutKeyOf(key))).toBe(0);
    expect(await admin.pTTL(requestKey)).toBeGreaterThan(0);
  });

  it('rejects bad input before any command, without showing a permit id', async () => {
    const locks = lockClient();
    const monitor = await res.monitor();
    expect(() => locks.permitSemaphore('x', { permits: -1 })).toThrow(
      'Expected `permits` to be a whole number from 1 to 2147483647, got `-1` (number)',
    );
    expect(() => locks.permitSemaphore('x', { permits: 1.5 })).toThrow(InvalidArgumentError);
    expect(() => locks.permitSemaphore('x', { permits: '3' } as never)).toThrow(InvalidArgumentError);
    expect(() => locks.permitSemaphore('x', { leases: 3 } as never)).toThrow(InvalidArgumentError);
    const semaphore = locks.permitSemaphore('x', { permits: 1 });
    const secretish = `${'ab'.repeat(16)}0`;
    const bad = await settle(semaphore.release(secretish));
    expect(bad.error).toBeInstanceOf(InvalidArgumentError);
    expect((bad.error as Error).message).not.toContain('abab');
    await expect(semaphore.release(42 as never)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(semaphore.trySetPermits(-1)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(semaphore.addPermits(0)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(semaphore.addPermits(0.5)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(semaphore.acquire({ leaseMs: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await sleep(100);
    const sent = commandsFrom(monitor.lines).filter((command) =>
      command.some((arg) => arg.includes(semaphore.key)),
    );
    expect(sent).toEqual([]);
  });
});
