/**
 * Redis frozen with SIGSTOP (connections stay open, nothing is answered):
 * - for less than the watchdog lease, nothing is lost: no lockLost, every hold is still in
 *   Redis afterwards, and releasing and handing over work once the server runs again;
 * - for longer than the lease, every holder is told (lockLost with a LockLostError, the
 *   lease's signal aborted) no later than one renewal interval after the server resumes,
 *   every call made meanwhile ends with a result or a LockError, and nothing is left as an
 *   unhandled rejection.
 */
import { describe, expect, it } from 'vitest';
import {
  LockError,
  LockLostError,
  LockNotOwnedError,
  type Lease,
  type LockClient,
  type LockLostEvent,
} from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { settle, sleep, waitUntil, within, type Settled } from '../support/wait.js';
import { ownServer } from './own-server.js';
import { scaled } from './scale.js';

interface Timed<T> {
  readonly at: number;
  readonly value: T;
}

function recordLockLost(locks: LockClient): Timed<LockLostEvent>[] {
  const events: Timed<LockLostEvent>[] = [];
  locks.on('lockLost', (event) => events.push({ at: performance.now(), value: event }));
  return events;
}

function recordRenewFailed(locks: LockClient): { count: number } {
  const seen = { count: 0 };
  locks.on('renewFailed', () => {
    seen.count += 1;
  });
  return seen;
}

/** A call made against a frozen server must end, and only with a result or a LockError. */
function typedOrValue(outcome: { error?: unknown }): boolean {
  return !('error' in outcome) || outcome.error instanceof LockError;
}

describe('Redis paused with SIGSTOP', () => {
  const env = ownServer();
  const { res } = env;

  /** Pauses for `ms`, resuming even if the wait is interrupted; returns when it resumed. */
  async function pauseFor(ms: number): Promise<{ pausedAt: number; resumedAt: number }> {
    await env.server.pause();
    const pausedAt = performance.now();
    try {
      await sleep(ms);
    } finally {
      await env.server.resume();
    }
    return { pausedAt, resumedAt: performance.now() };
  }

  describe('for less than the lease', () => {
    const LEASE_MS = 1_500;
    // A third of the lease. The command timeout is shorter than the pause, so a renewal sent
    // early in a pause fails and is retried after it; even then the retry lands well inside
    // the lease of the last renewal confirmed before the pause.
    const PAUSE_MS = 500;
    const COMMAND_TIMEOUT_MS = 300;

    it('loses nothing: no lockLost, holds still in Redis, release and handover work after', async () => {
      const prefix = uniquePrefix('pause-short');
      const options = {
        keyPrefix: prefix,
        watchdogTimeoutMs: LEASE_MS,
        commandTimeoutMs: COMMAND_TIMEOUT_MS,
      };
      const locks = await res.lockClient(options);
      const other = await res.lockClient(options);
      const lostHere = recordLockLost(locks);
      const lostThere = recordLockLost(other);
      const renewFailed = recordRenewFailed(locks);
      const names = ['invoice:1', 'invoice:2', 'invoice:3'];
      const leases: Lease[] = [];
      for (const name of names) leases.push(await locks.lock(name).acquire());
      // A waiter in another client, parked on the unlock channel across the pauses.
      const waiting = settle(other.lock('invoice:3').acquire({ waitMs: 60_000 }));

      // Several pauses at different points of the renewal cycle.
      const rounds = scaled(2, 5);
      for (let round = 0; round < rounds; round += 1) {
        await sleep(Math.floor(Math.random() * (LEASE_MS / 3)));
        await pauseFor(PAUSE_MS);
        // A full lease after the pause: a missed renewal would have shown by now.
        await sleep(LEASE_MS);
        expect(lostHere).toEqual([]);
      }

      expect(lostHere).toEqual([]);
      expect(lostThere).toEqual([]);
      for (const lease of leases) {
        expect(lease.signal.aborted).toBe(false);
        expect(lease.holdCount).toBe(1);
        expect(await env.admin.hVals(lease.key)).toEqual(['1']);
        const pttl = await env.admin.pTTL(lease.key);
        expect(pttl).toBeGreaterThan(0);
        expect(pttl).toBeLessThanOrEqual(LEASE_MS);
      }

      const [first, second, third] = leases;
      if (first === undefined || second === undefined || third === undefined) throw new Error('no leases');
      await first.release();
      await second.release();
      expect(await env.admin.exists(first.key)).toBe(0);
      expect(await env.admin.exists(second.key)).toBe(0);

      // The waiter that waited through every pause takes the lock once it is released.
      const releasedAt = performance.now();
      await third.release();
      const handed = await within(waiting, 5_000, 'the waiter across the pauses');
      expect(handed.error).toBeUndefined();
      expect(handed.at - releasedAt).toBeLessThan(1_000);
      const taken = handed.value;
      if (taken === undefined) throw new Error('the waiter got no lease');
      expect(await env.admin.hVals(taken.key)).toEqual(['1']);
      await taken.release();
      expect(await env.admin.exists(taken.key)).toBe(0);

      expect(lostHere).toEqual([]);
      expect(lostThere).toEqual([]);
      await sleep(50);
      expect(env.unhandled).toEqual([]);
      console.info(
        `[redis-pause] short: ${rounds} pauses of ${PAUSE_MS} ms under a ${LEASE_MS} ms lease, ` +
          `renewFailed events: ${renewFailed.count}, handover after release: ${Math.round(handed.at - releasedAt)} ms`,
      );
    }, 60_000);
  });

  describe('for longer than the lease', () => {
    const LEASE_MS = 1_200;
    const RENEW_INTERVAL_MS = LEASE_MS / 3;
    const PAUSE_MS = 2 * LEASE_MS;
    const COMMAND_TIMEOUT_MS = 300;
    // Timer and event-loop lateness on a busy two-core machine.
    const SLACK_MS = 250;

    it('tells every holder within one renewal interval after resume, with no crash and no env.unhandled rejection', async () => {
      const prefix = uniquePrefix('pause-long');
      const options = {
        keyPrefix: prefix,
        watchdogTimeoutMs: LEASE_MS,
        commandTimeoutMs: COMMAND_TIMEOUT_MS,
      };
      const locks = await res.lockClient(options);
      const lost = recordLockLost(locks);
      const renewFailed = recordRenewFailed(locks);

      const plain = await locks.lock('ledger:1').acquire();
      const reentered = await locks.lock('ledger:2').withLock(async (outer) => {
        // Returned from inside withLock so the hold count is 2 for one owner.
        return { outer, inner: await locks.lock('ledger:2').acquire() };
      });
      // withLock released its own acquisition on the way out; the inner one is still held.
      expect(reentered.inner.holdCount).toBe(1);
      let finishCallback: () => void = () => {};
      const callbackMayReturn = new Promise<void>((resolve) => {
        finishCallback = resolve;
      });
      let callbackLease: Lease | undefined;
      const inside = settle(
        locks.lock('ledger:3').withLock(async (lease) => {
          callbackLease = lease;
          await callbackMayReturn;
          return 'done';
        }),
      );
      await waitUntil('the withLock callback runs', () => callbackLease !== undefined, 5_000);
      const held: Lease[] = [plain, reentered.inner];
      if (callbackLease !== undefined) held.push(callbackLease);
      expect(held).toHaveLength(3);
      for (const lease of held) expect(await env.admin.exists(lease.key)).toBe(1);

      // Calls made while the server is frozen, each on a lock of its own.
      await env.server.pause();
      const pausedAt = performance.now();
      let resumedAt = Number.NaN;
      const acquiring = settle(locks.lock('ledger:free').acquire({ waitMs: 500 }));
      const trying = settle(locks.lock('ledger:free-try').tryAcquire());
      const reading = [
        settle(locks.lock('ledger:1').isLocked()),
        settle(locks.lock('ledger:1').remainingTtlMs()),
      ];
      let duringPause: Settled<unknown>[] = [];
      let pauseLeases: (Lease | null | undefined)[] = [];
      try {
        await sleep(PAUSE_MS);
        await env.server.resume();
        resumedAt = performance.now();
        const [acquired, tried, ...read] = await within(
          Promise.all([acquiring, trying, ...reading]),
          30_000,
          'calls made during the pause',
        );
        duringPause = [acquired, tried, ...read];
        pauseLeases = [acquired.value, tried.value];
      } finally {
        await env.server.resume();
      }

      await waitUntil('every holder was told', () => lost.length >= held.length, 5_000);
      expect(lost).toHaveLength(held.length);
      expect(new Set(lost.map((event) => event.value.key))).toEqual(new Set(held.map((lease) => lease.key)));
      for (const event of lost) {
        expect(event.value.error).toBeInstanceOf(LockLostError);
        expect(['expired', 'not-owner']).toContain(event.value.error.reason);
        // Told no later than one renewal interval after the server came back.
        expect(event.at - resumedAt).toBeLessThanOrEqual(RENEW_INTERVAL_MS + SLACK_MS);
        // And not long before the lease could have run out: the last renewal confirmed before
        // the pause was sent at most one interval (plus lateness) before it.
        expect(event.at - pausedAt).toBeGreaterThanOrEqual(LEASE_MS / 2);
      }
      for (const lease of held) {
        expect(lease.signal.aborted).toBe(true);
        expect(lease.signal.reason).toBeInstanceOf(LockLostError);
        expect(lease.holdCount).toBe(0);
      }

      // Every call made during the pause ended, each with a result or a typed error.
      expect(duringPause).toHaveLength(4);
      for (const outcome of duringPause) expect(typedOrValue(outcome)).toBe(true);

      // The callback ends normally, yet withLock reports that its lock was lost meanwhile.
      finishCallback();
      const ended = await within(inside, 10_000, 'withLock around the pause');
      expect(ended.error).toBeInstanceOf(LockLostError);

      // Releasing a lost lease is refused with a typed error; nothing else breaks.
      await expect(plain.release()).rejects.toBeInstanceOf(LockNotOwnedError);
      await expect(reentered.inner.release()).rejects.toBeInstanceOf(LockNotOwnedError);

      // The locks are free again on the server and can be taken by anyone.
      const other = await res.lockClient(options);
      for (const lease of held) {
        const again = await within(
          other.lock(lease.name).acquire({ waitMs: 5_000 }),
          10_000,
          'a new acquire',
        );
        expect(await env.admin.hVals(again.key)).toEqual(['1']);
        await again.release();
        expect(await env.admin.exists(again.key)).toBe(0);
      }
      // A lease that came out of the pause is released properly.
      for (const lease of pauseLeases) {
        if (lease === null || lease === undefined) continue;
        const released = await settle(lease.release());
        expect(typedOrValue(released)).toBe(true);
      }

      await sleep(50);
      expect(env.unhandled).toEqual([]);
      const lags = lost.map((event) => Math.round(event.at - resumedAt));
      const sincePause = lost.map((event) => Math.round(event.at - pausedAt));
      const outcomes = duringPause.map((outcome) =>
        outcome.error === undefined ? 'ok' : (outcome.error as LockError).code,
      );
      console.info(
        `[redis-pause] long: pause ${Math.round(resumedAt - pausedAt)} ms, lease ${LEASE_MS} ms; ` +
          `lockLost at ${sincePause.join('/')} ms after pause = ${lags.join('/')} ms after resume; ` +
          `renewFailed ${renewFailed.count}; calls during pause: ${outcomes.join(', ')}`,
      );
    }, 60_000);
  });
});
