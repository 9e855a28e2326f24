/**
 * The simple token lock: `SET <key> <token> NX PX`, compare-and-delete release and
 * compare-and-PEXPIRE renewal, shared with clients that write the same layout (redis-py's Lock,
 * node-redlock: played here by raw commands) and waited for without a wait queue — by
 * latchkey's own unlock message, the holder's PTTL, and capped re-checks for holders that
 * announce nothing.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockLostError,
  LockNotOwnedError,
  LockReentryError,
  LockTimeoutError,
  type LockLostEvent,
} from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { commandsFrom } from '../support/monitor.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

/** latchkey's unlock channel for a simple lock, spelt out here rather than taken from src/keys.ts. */
function channelOf(key: string): string {
  return `latchkey_unlock:{${key}}`;
}

/** The longest a waiter goes without re-checking a lock whose holder announces nothing. */
const POLL_CAP_MS = 250;

describe('SimpleLock', () => {
  const suite = sharedSuite('simple');
  const { res, lockClient } = suite;
  /** Plays a foreign client of the same layout: raw SET NX PX and DEL, publishing nothing. */
  let foreign: Redis;
  beforeAll(() => {
    foreign = suite.admin;
  });

  it('holds a string key with a random token and a lease, and deletes it on release with a message', async () => {
    const lock = lockClient({ watchdogTimeoutMs: 5_000 }).simpleLock('reports:nightly');
    const messages: string[] = [];
    const subscriber = await res.connect();
    await subscriber.subscribe(channelOf(lock.key), (message) => messages.push(message));

    const lease = await lock.acquire();
    expect(await foreign.type(lock.key)).toBe('string');
    expect(await foreign.get(lock.key)).toMatch(/^[0-9a-f]{32}$/);
    expect(await foreign.pTTL(lock.key)).toBeGreaterThan(4_000);
    expect(lease.holdCount).toBe(1);
    expect(await lock.isLocked()).toBe(true);

    await lease.release();
    expect(await foreign.exists(lock.key)).toBe(0);
    await waitUntil('the unlock message arrived', () => messages.length === 1);
    expect(messages).toEqual(['0']);
  });

  it('is refused while a foreign client holds the key, and leaves that key as it was', async () => {
    const lock = lockClient().simpleLock('reports:weekly');
    await foreign.set(lock.key, 'their-token', { NX: true, PX: 5_000 });
    expect(await lock.tryAcquire()).toBeNull();
    const timedOut = await settle(lock.acquire({ waitMs: 300 }));
    expect(timedOut.error).toBeInstanceOf(LockTimeoutError);
    expect(await foreign.get(lock.key)).toBe('their-token');
    expect(await lock.forceUnlock()).toBe(true);
    expect(await foreign.exists(lock.key)).toBe(0);
  });

  it('takes the key within the poll cap after a foreign holder deletes it without a word', async () => {
    const lock = lockClient().simpleLock('reports:monthly');
    // No expiry at all: only a re-check can find the key gone.
    await foreign.set(lock.key, 'their-token');
    const monitor = await res.monitor();
    let acquiredAt = 0;
    const waiting = lock.acquire({ waitMs: 10_000 }).then((lease) => {
      acquiredAt = performance.now();
      return lease;
    });
    await sleep(1_000);
    expect(acquiredAt).toBe(0);
    // Re-checks back off to the cap: far fewer than one per 25 ms, yet some.
    const sha = luaScripts['simple-lock/acquire'].sha1;
    const source = luaScripts['simple-lock/acquire'].source;
    const tries = commandsFrom(monitor.lines, { excludeLua: true }).filter(
      (command) => (command[1] === sha || command[1] === source) && command.includes(lock.key),
    ).length;
    expect(tries).toBeGreaterThanOrEqual(4);
    expect(tries).toBeLessThanOrEqual(12);

    await foreign.del(lock.key);
    const deletedAt = performance.now();
    const lease = await waiting;
    expect(acquiredAt - deletedAt).toBeLessThan(POLL_CAP_MS + 150);
    expect(await foreign.get(lock.key)).toMatch(/^[0-9a-f]{32}$/);
    await lease.release();
  });

  it("wakes a waiter at once on latchkey's own release, and by the PTTL when a foreign lease runs out", async () => {
    const lock = lockClient().simpleLock('exports:daily');
    const holder = await lockClient().simpleLock('exports:daily').acquire();
    const waiting = settle(lock.acquire({ waitMs: 10_000 }));
    await waitUntil('the waiter subscribed', async () => (await res.numsub(channelOf(lock.key))) === 1);
    await sleep(600);
    const releasedAt = performance.now();
    await holder.release();
    const woken = await waiting;
    expect(woken.error).toBeUndefined();
    expect(woken.at - releasedAt).toBeLessThan(100);
    await woken.value?.release();

    // A foreign holder whose lease runs out: the waiter is in by the PTTL, not before.
    await foreign.set(lock.key, 'their-token', { NX: true, PX: 400 });
    const setAt = performance.now();
    const afterExpiry = await settle(lock.acquire({ waitMs: 5_000 }));
    expect(afterExpiry.error).toBeUndefined();
    expect(afterExpiry.at - setAt).toBeGreaterThanOrEqual(390);
    expect(afterExpiry.at - setAt).toBeLessThan(400 + POLL_CAP_MS + 150);
    await afterExpiry.value?.release();
  });

  it("never deletes a key that holds someone else's token", async () => {
    const lock = lockClient().simpleLock('exports:weekly');
    const lease = await lock.acquire({ leaseMs: 100 });
    await waitUntil('the lease ran out', async () => (await foreign.exists(lock.key)) === 0, 2_000);
    await foreign.set(lock.key, 'their-token', { NX: true, PX: 5_000 });
    const released = await settle(lease.release());
    expect(released.error).toBeInstanceOf(LockNotOwnedError);
    expect(await foreign.get(lock.key)).toBe('their-token');
  });

  it('is renewed by the watchdog while held, and reports the loss when its token is replaced', async () => {
    // A lease of 1 s, renewed every third: a stall of a loaded machine's scheduler must pass
    // 600 ms to lose it (with 300 ms, a stall of 200 ms at load 13 did).
    const locks = lockClient({ watchdogTimeoutMs: 1_000 });
    const lost: LockLostEvent[] = [];
    locks.on('lockLost', (event) => lost.push(event));
    const lock = locks.simpleLock('exports:monthly');
    const lease = await lock.acquire();
    const token = await foreign.get(lock.key);
    // Three leases.
    await sleep(3_000);
    expect(await foreign.get(lock.key)).toBe(token);
    expect(await foreign.pTTL(lock.key)).toBeGreaterThan(0);
    expect(lease.signal.aborted).toBe(false);

    await foreign.set(lock.key, 'their-token', { PX: 5_000 });
    await waitUntil('the loss is reported', () => lease.signal.aborted, 2_000);
    expect(lease.signal.reason).toBeInstanceOf(LockLostError);
    expect((lease.signal.reason as LockLostError).reason).toBe('not-owner');
    expect(lost.map((event) => event.name)).toEqual(['exports:monthly']);
    expect(await foreign.get(lock.key)).toBe('their-token');
    // No token appears in what the user is told.
    expect(String(token)).not.toBe('');
    expect((lease.signal.reason as Error).message).not.toContain(String(token));
  });

  it('is not reentrant: taking it again inside its own withLock is refused at once', async () => {
    const lock = lockClient().simpleLock('payroll:run');
    expect(lock.reentrant).toBe(false);
    expect(lock.isHeldByCurrentContext()).toBe(false);
    await lock.withLock(async () => {
      expect(lock.isHeldByCurrentContext()).toBe(true);
      const again = await settle(lock.acquire());
      expect(again.error).toBeInstanceOf(LockReentryError);
    });
    expect(await lock.isLocked()).toBe(false);
  });

  it('side-by-side withLock callbacks exclude each other', async () => {
    const lock = lockClient().simpleLock('payroll:close');
    let inside = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 5 }, () =>
        lock.withLock(async () => {
          inside += 1;
          most = Math.max(most, inside);
          await sleep(10);
          inside -= 1;
        }),
      ),
    );
    expect(most).toBe(1);
  });

  it('an aborted or timed-out wait leaves no key and no subscription behind', async () => {
    const locks = lockClient({ subscriptionLingerMs: 0 });
    const lock = locks.simpleLock('ledger:close');
    await foreign.set(lock.key, 'their-token', { PX: 5_000 });
    const controller = new AbortController();
    const aborted = settle(lock.acquire({ signal: controller.signal }));
    await sleep(100);
    const abortedAt = performance.now();
    controller.abort(new Error('shutting down'));
    const outcome = await aborted;
    expect(outcome.error).toMatchObject({ message: 'shutting down' });
    expect(outcome.at - abortedAt).toBeLessThan(100);
    const timedOut = await settle(lock.acquire({ waitMs: 150 }));
    expect(timedOut.error).toBeInstanceOf(LockTimeoutError);
    await foreign.del(lock.key);
    await sleep(50);
    expect(await foreign.exists(lock.key)).toBe(0);
    await waitUntil('unsubscribed', async () => (await res.numsub(channelOf(lock.key))) === 0);
  });

  it('rejects a bad name before any command', () => {
    const locks = lockClient();
    expect(() => locks.simpleLock('')).toThrow(InvalidArgumentError);
    expect(() => locks.simpleLock('a\nb')).toThrow(InvalidArgumentError);
    expect(() => locks.fencedLock('')).toThrow(InvalidArgumentError);
    expect(() => locks.fencedLock('x', { reentrant: 'yes' } as never)).toThrow(InvalidArgumentError);
  });
});
