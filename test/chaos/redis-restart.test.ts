/**
 * Redis restarted without persistence while clients keep taking and releasing locks: the
 * server comes back empty on the same port. For every kind of lock (test/support/kinds.ts).
 * - Locks held before the restart are reported lost (lockLost) within about a lease.
 * - Every call made around the restart ends with a result or a LockError, and new
 *   acquisitions succeed again afterwards.
 * - Subscriptions come back: the unlock channel a client waited on before the restart is
 *   subscribed on the new server, and waiters (one waiting across the restart, one that
 *   starts after it) are woken by the unlock message of a release, not by the PTTL of a
 *   30 s lease. The simple lock's waiters also re-check every 250 ms or less, which alone
 *   meets the 1 s bound: for that kind the wake-ups show only that nothing fails.
 * Fencing tokens are not compared across the restart: the token counter has no persistence
 * either, so the fenced lock's tokens start again from 1 on the new server.
 */
import { describe, expect, it } from 'vitest';
import {
  LockError,
  LockLostError,
  type Lease,
  type LockClient,
  type LockLostEvent,
} from '../../src/index.js';
import { KINDS } from '../support/kinds.js';
import { uniquePrefix } from '../support/keys.js';
import { numsubOn, type Redis } from '../support/resources.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';
import { ownServer } from './own-server.js';
import { scaled } from './scale.js';

const LEASE_MS = 1_500;
const COMMAND_TIMEOUT_MS = 500;
/** A lease far longer than any wake-up the test accepts, so only a message can explain one. */
const LONG_LEASE_MS = 30_000;
const WAKE_BOUND_MS = 1_000;
const CALL_BOUND_MS = 20_000;

interface Timed<T> {
  readonly at: number;
  readonly value: T;
}

interface LoadStats {
  acquired: number;
  acquiredAfterRestart: number;
  released: number;
  readonly errors: Map<string, number>;
  readonly untyped: unknown[];
}

function recordLockLost(locks: LockClient): Timed<LockLostEvent>[] {
  const events: Timed<LockLostEvent>[] = [];
  locks.on('lockLost', (event) => events.push({ at: performance.now(), value: event }));
  return events;
}

function randomInt(below: number): number {
  return Math.floor(Math.random() * below);
}

// Waiters parked behind a holder: a second reader of a read lock gets straight in, so it is left out.
const EXCLUSIVE_KINDS = KINDS.filter((kind) => kind.exclusive);

describe.each(EXCLUSIVE_KINDS)('Redis restarted without persistence under load: $name', (kind) => {
  const env = ownServer();
  const { res } = env;

  /** `read` on `admin`, again after a moment if the connection is still finding the new server. */
  async function retrying<T>(read: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await read();
      } catch (error) {
        if (attempt >= 50) throw error;
        await sleep(100);
      }
    }
  }

  it('reports held locks lost, keeps working, and restores subscriptions', async () => {
    const prefix = uniquePrefix('restart');
    const options = { keyPrefix: prefix, watchdogTimeoutMs: LEASE_MS, commandTimeoutMs: COMMAND_TIMEOUT_MS };
    const loadKeys = scaled(3, 6);
    const loadClients = scaled(3, 6);
    const loopsPerClient = 2;

    // Locks held before the restart, on the short watchdog lease.
    const holders = await res.lockClient(options);
    const lost = recordLockLost(holders);
    const held: Lease[] = [];
    for (let i = 0; i < 4; i += 1) held.push(await kind.handle(holders, `held:${i}`).acquire());

    // A lock held on a 30 s lease, and a client with two waiters queued on it.
    const longHolder = await res.lockClient({ keyPrefix: prefix, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    const waiters = await res.lockClient({ keyPrefix: prefix, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    const parked = await kind.handle(longHolder, 'parked').acquire({ leaseMs: LONG_LEASE_MS });
    const channel = kind.channel(parked.key);
    const first = settle(kind.handle(waiters, 'parked').acquire());
    await waitUntil('the first waiter subscribed', async () => (await res.numsub(channel)) >= 1, 10_000);
    // The first waiter must be ahead of the second in the client's queue.
    await sleep(100);
    let firstGotIt = false;
    void first.then(() => {
      firstGotIt = true;
    });
    const second = settle(kind.handle(waiters, 'parked').acquire());
    await sleep(100);
    expect(firstGotIt).toBe(false);

    // Load: several clients taking and releasing a few contended locks.
    const stats: LoadStats = {
      acquired: 0,
      acquiredAfterRestart: 0,
      released: 0,
      errors: new Map(),
      untyped: [],
    };
    let restartedAt = Number.POSITIVE_INFINITY;
    let stop = false;
    const countError = (error: unknown): void => {
      if (error instanceof LockError) stats.errors.set(error.code, (stats.errors.get(error.code) ?? 0) + 1);
      else stats.untyped.push(error);
    };
    const loop = async (locks: LockClient): Promise<void> => {
      while (!stop) {
        const startedAt = performance.now();
        const lock = kind.handle(locks, `load:${randomInt(loadKeys)}`);
        let lease: Lease;
        try {
          lease = await within(lock.acquire({ waitMs: 1_500 }), CALL_BOUND_MS, 'a load acquire');
        } catch (error) {
          countError(error);
          await sleep(10);
          continue;
        }
        stats.acquired += 1;
        if (startedAt > restartedAt) stats.acquiredAfterRestart += 1;
        await sleep(1 + randomInt(10));
        try {
          await within(lease.release(), CALL_BOUND_MS, 'a load release');
          stats.released += 1;
        } catch (error) {
          // An unconfirmed or refused release: the lock runs out with its lease.
          countError(error);
        }
      }
    };
    const loops: Promise<void>[] = [];
    for (let c = 0; c < loadClients; c += 1) {
      const locks = await res.lockClient(options);
      for (let l = 0; l < loopsPerClient; l += 1) loops.push(loop(locks));
    }
    await sleep(1_000);
    const acquiredBefore = stats.acquired;
    expect(acquiredBefore).toBeGreaterThan(0);

    const restartFrom = performance.now();
    await env.server.restart();
    restartedAt = performance.now();

    // Every lock held before the restart is reported lost within about a lease.
    await waitUntil('every held lock was reported lost', () => lost.length >= held.length, LEASE_MS + 5_000);
    expect(lost).toHaveLength(held.length);
    for (const event of lost) {
      expect(event.value.error).toBeInstanceOf(LockLostError);
      expect(event.at - restartedAt).toBeLessThanOrEqual(LEASE_MS + 1_000);
    }
    for (const lease of held) {
      expect(lease.signal.aborted).toBe(true);
      expect(lease.signal.reason).toBeInstanceOf(LockLostError);
    }

    // The first waiter waited across the restart; the lock it waited for is gone with the old
    // server, and the re-check after resubscribing finds that out long before 30 s.
    const firstOutcome = await within(first, 10_000, 'the waiter across the restart');
    expect(firstOutcome.error).toBeUndefined();
    const firstLease = firstOutcome.value;
    if (firstLease === undefined) throw new Error('the first waiter got no lease');
    const firstWokeAfterMs = firstOutcome.at - restartedAt;

    // The second waiter is still queued, and the client's subscription to the unlock channel
    // was restored on the new server.
    const admin: Redis = await res.connect();
    const numsub = async (): Promise<number> => retrying(() => numsubOn(admin, channel));
    await sleep(200);
    const secondEarly = await Promise.race([second.then(() => true), sleep(0).then(() => false)]);
    expect(secondEarly).toBe(false);
    expect(await numsub()).toBeGreaterThanOrEqual(1);
    expect((await retrying(() => kind.inspect(admin, firstLease.key))).pttl).toBeGreaterThan(
      LONG_LEASE_MS / 2,
    );

    // The release publishes the unlock message, which wakes the second waiter at once.
    const releasedAt = performance.now();
    await firstLease.release();
    const secondOutcome = await within(second, 10_000, 'the waiter queued across the restart');
    expect(secondOutcome.error).toBeUndefined();
    const secondWokeAfterMs = secondOutcome.at - releasedAt;
    expect(secondWokeAfterMs).toBeLessThanOrEqual(WAKE_BOUND_MS);
    await secondOutcome.value?.release();

    // A waiter that starts after the restart, on a lock held on the new server for 30 s.
    const fresh = await kind.handle(longHolder, 'fresh').acquire({ leaseMs: LONG_LEASE_MS });
    const freshChannel = kind.channel(fresh.key);
    const third = settle(kind.handle(waiters, 'fresh').acquire());
    await waitUntil(
      'the waiter after the restart subscribed',
      async () => (await retrying(() => numsubOn(admin, freshChannel))) >= 1,
      10_000,
    );
    await sleep(100);
    const freshReleasedAt = performance.now();
    await fresh.release();
    const thirdOutcome = await within(third, 10_000, 'the waiter after the restart');
    expect(thirdOutcome.error).toBeUndefined();
    const thirdWokeAfterMs = thirdOutcome.at - freshReleasedAt;
    expect(thirdWokeAfterMs).toBeLessThanOrEqual(WAKE_BOUND_MS);
    await thirdOutcome.value?.release();

    // New acquisitions work for the clients whose locks were lost.
    for (let i = 0; i < held.length; i += 1) {
      const again = await within(
        kind.handle(holders, `held:${i}`).acquire({ waitMs: 5_000 }),
        10_000,
        'a new acquire',
      );
      if (kind.keyType === 'hash') expect((await kind.inspect(admin, again.key)).counts).toEqual([1]);
      else expect(await kind.inspect(admin, again.key)).toMatchObject({ type: kind.keyType, owners: 1 });
      await again.release();
    }

    // The load went on after the restart, and nothing failed with an untyped error.
    await sleep(500);
    stop = true;
    await within(Promise.all(loops), 30_000, 'the load loops');
    expect(stats.untyped).toEqual([]);
    expect(stats.acquiredAfterRestart).toBeGreaterThan(0);

    await sleep(50);
    expect(env.unhandled).toEqual([]);

    const errorSummary = [...stats.errors].map(([code, count]) => `${code}=${count}`).join(' ') || 'none';
    console.info(
      `[redis-restart ${kind.name}] restart took ${Math.round(restartedAt - restartFrom)} ms; ` +
        `lockLost ${lost.map((event) => Math.round(event.at - restartedAt)).join('/')} ms after restart ` +
        `(${lost.map((event) => event.value.error.reason).join('/')}); ` +
        `waiter across restart got the freed lock ${Math.round(firstWokeAfterMs)} ms after restart; ` +
        `woken by unlock message ${Math.round(secondWokeAfterMs)} ms (across) / ${Math.round(thirdWokeAfterMs)} ms (after); ` +
        `load: ${stats.acquired} acquired (${acquiredBefore} before restart, ${stats.acquiredAfterRestart} started after), ` +
        `${stats.released} released, errors: ${errorSummary}`,
    );
  }, 60_000);
});
