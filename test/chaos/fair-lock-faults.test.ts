/**
 * Faults of the fair lock's waiters and holder, as real Node processes on the shared server:
 *   - a waiter SIGKILLed at the head of the line: the owner behind it is served once the dead
 *     head's heartbeat deadline passes (no earlier), within the documented bound of about `waiterTimeoutMs`
 *     plus one heartbeat, though the release's wake-up went to the dead head;
 *   - a waiter frozen (SIGSTOP) at the head past `waiterTimeoutMs`: it loses its place, the owner
 *     behind it is served, and once thawed (SIGCONT) it queues again at the back of the line;
 *   - a holder SIGKILLed: the head is served when the lease runs out.
 * Each leaves no queue entry and no deadline behind. Times are monotonic nanosecond stamps,
 * comparable across the processes of the machine.
 */
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import type { Worker } from '../support/child.js';
import { fairHeartbeatsOf, fairQueueOf, fairTimeoutsOf } from '../support/keys.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { msBetween, now } from '../support/stamps.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

const WORKER = 'test/support/fixtures/fair-waiter.ts';
const WAITER_TIMEOUT_MS = 1_500;
const HEARTBEAT_MS = WAITER_TIMEOUT_MS / 3;
const LEASE_MS = 1_500;
/** Room for a loaded machine: scheduling, a script call, a process start. */
const SLACK_MS = 1_000;
const STARTUP_MS = 20_000;

async function redisNowMs(admin: Redis): Promise<number> {
  const [seconds, micros] = await admin.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

describe('fair lock faults', () => {
  const suite = sharedSuite('fair-faults');
  const { res, lockClient } = suite;

  async function setUp(name: string, extraEnv: Record<string, string> = {}) {
    const locks = lockClient({ watchdogTimeoutMs: LEASE_MS });
    const lock = locks.fairLock(name, { waiterTimeoutMs: WAITER_TIMEOUT_MS });
    const prefix = lock.key.slice(0, -lock.name.length);
    const worker: Worker = res.worker(WORKER, {
      REDIS_URL: suite.url,
      KEY_PREFIX: prefix,
      LOCK_NAME: lock.name,
      WAITER_TIMEOUT_MS: String(WAITER_TIMEOUT_MS),
      ...extraEnv,
    });
    await worker.next((msg) => msg.type === 'ready', STARTUP_MS);
    const admin = suite.admin;
    const queueLength = async (): Promise<number> => admin.lLen(fairQueueOf(lock.key));
    const line = async (): Promise<string[]> => admin.lRange(fairQueueOf(lock.key), 0, -1);
    const nothingLeft = async (): Promise<void> => {
      expect(
        await admin.exists([
          lock.key,
          fairQueueOf(lock.key),
          fairTimeoutsOf(lock.key),
          fairHeartbeatsOf(lock.key),
        ]),
      ).toBe(0);
    };
    return { lock, worker, admin, queueLength, line, nothingLeft };
  }

  it(
    'serves the next waiter within the bound when the head was SIGKILLed, not before its deadline',
    async () => {
      const { lock, worker, admin, queueLength, line, nothingLeft } = await setUp('settlements:dead-head');
      const holder = await lock.acquire();
      worker.send({ type: 'acquire', id: 'dead', holdMs: 60_000 });
      await waitUntil('the worker heads the line', async () => (await queueLength()) === 1);
      const [deadField] = await line();
      if (deadField === undefined) throw new Error('nobody queued');
      const next = lock.acquire({ waitMs: 20_000 });
      await waitUntil('the next waiter queued', async () => (await queueLength()) === 2);

      worker.kill('SIGKILL');
      await worker.exited;
      const killedAt = now();
      // The dead head's heartbeat deadline as Redis has it, placed on this machine's monotonic
      // clock (its deadline in RFairLock's arithmetic lies minutes ahead).
      const [deadline, redisNow] = await Promise.all([
        admin.zScore(fairHeartbeatsOf(lock.key), deadField),
        redisNowMs(admin),
      ]);
      const readAt = now();
      if (deadline === null) throw new Error('the dead head has no heartbeat deadline');
      const lapsesAt = readAt + BigInt(Math.round((deadline - redisNow) * 1e6));
      // The release wakes the dead head only: nobody hears it.
      await holder.release();

      const lease = await next;
      const servedAt = now();
      expect(msBetween(lapsesAt, servedAt)).toBeGreaterThanOrEqual(-50);
      expect(msBetween(killedAt, servedAt)).toBeLessThan(WAITER_TIMEOUT_MS + HEARTBEAT_MS + SLACK_MS);
      expect(await line()).toEqual([]);
      expect(await admin.zScore(fairTimeoutsOf(lock.key), deadField)).toBeNull();
      expect(await admin.zScore(fairHeartbeatsOf(lock.key), deadField)).toBeNull();
      await lease.release();
      await nothingLeft();
    },
    STARTUP_MS + 30_000,
  );

  it(
    'drops a head frozen past the waiter timeout, serves the one behind, and re-queues it at the back once thawed',
    async () => {
      const { lock, worker, queueLength, line, nothingLeft } = await setUp('settlements:frozen-head');
      const holder = await lock.acquire();
      worker.send({ type: 'acquire', id: 'frozen', holdMs: 100 });
      await waitUntil('the worker heads the line', async () => (await queueLength()) === 1);
      const [frozenField] = await line();
      const second = lock.acquire({ waitMs: 30_000 });
      await waitUntil('the second waiter queued', async () => (await queueLength()) === 2);
      const third = lock.acquire({ waitMs: 30_000 });
      await waitUntil('the third waiter queued', async () => (await queueLength()) === 3);
      const [, secondField, thirdField] = await line();

      worker.kill('SIGSTOP');
      const frozenAt = now();
      await holder.release();
      const secondLease = await second;
      const servedAt = now();
      expect(msBetween(frozenAt, servedAt)).toBeLessThan(WAITER_TIMEOUT_MS + HEARTBEAT_MS + SLACK_MS);
      // The frozen head lost its place; the third is next.
      expect(await line()).toEqual([thirdField]);
      expect(secondField).not.toBe(frozenField);

      worker.kill('SIGCONT');
      // Thawed, it asks again, finds the lock held and joins at the back, behind the third.
      await waitUntil('the thawed worker queued again', async () => (await queueLength()) === 2, 10_000);
      expect(await line()).toEqual([thirdField, frozenField]);

      const order: string[] = [];
      const thirdServed = third.then((lease: Lease) => {
        order.push('third');
        return lease;
      });
      const frozenServed = worker
        .next((msg) => msg.type === 'acquired' && msg.id === 'frozen', 20_000)
        .then(() => {
          order.push('frozen');
        });
      await sleep(200);
      await secondLease.release();
      const thirdLease = await thirdServed;
      await sleep(300);
      expect(order).toEqual(['third']);
      await thirdLease.release();
      await frozenServed;
      expect(order).toEqual(['third', 'frozen']);
      await worker.next((msg) => msg.type === 'released' && msg.id === 'frozen', 20_000);
      await nothingLeft();
    },
    STARTUP_MS + 60_000,
  );

  it(
    'serves the head when the holder was SIGKILLed, by its lease',
    async () => {
      const { lock, worker, queueLength, nothingLeft } = await setUp('settlements:dead-holder', {
        WATCHDOG_MS: String(LEASE_MS),
      });
      worker.send({ type: 'acquire', id: 'holder', holdMs: 60_000 });
      await worker.next((msg) => msg.type === 'acquired', 20_000);
      const first = lock.acquire({ waitMs: 30_000 });
      await waitUntil('the first waiter queued', async () => (await queueLength()) === 1);
      const second = settle(lock.acquire({ waitMs: 30_000 }));
      await waitUntil('the second waiter queued', async () => (await queueLength()) === 2);

      worker.kill('SIGKILL');
      const killedAt = now();
      const firstLease = await first;
      expect(msBetween(killedAt, now())).toBeLessThan(LEASE_MS + SLACK_MS);
      expect(await queueLength()).toBe(1);
      await firstLease.release();
      const secondLease = (await second).value;
      if (secondLease === undefined) throw new Error('the second waiter was not served');
      await secondLease.release();
      await nothingLeft();
    },
    STARTUP_MS + 30_000,
  );

  it(
    'keeps the place of a waiter that stalls for less than the waiter timeout',
    async () => {
      const { lock, worker, queueLength, line, nothingLeft } = await setUp('settlements:short-stall');
      const holder = await lock.acquire();
      worker.send({ type: 'acquire', id: 'stalled', holdMs: 100 });
      await waitUntil('the worker heads the line', async () => (await queueLength()) === 1);
      const [stalledField] = await line();
      const second = lock.acquire({ waitMs: 30_000 });
      await waitUntil('the second waiter queued', async () => (await queueLength()) === 2);
      // Frozen for a third of its timeout, while the lock stays held: its deadline never passes.
      worker.kill('SIGSTOP');
      await sleep(HEARTBEAT_MS);
      worker.kill('SIGCONT');
      await sleep(HEARTBEAT_MS);
      expect((await line())[0]).toBe(stalledField);
      await holder.release();
      await worker.next((msg) => msg.type === 'acquired' && msg.id === 'stalled', 20_000);
      const lease = await second;
      await lease.release();
      await worker.next((msg) => msg.type === 'released', 20_000);
      await nothingLeft();
    },
    STARTUP_MS + 30_000,
  );
});
