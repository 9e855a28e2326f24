import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { LockClient, type FencedLock, type Lock } from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { redissonChannel, redissonTryLock, redissonUnlock } from '../support/redisson.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';
import { sleep, waitUntil, within } from '../support/wait.js';

/**
 * A fleet where latchkey and Redisson's RLock protocol share one lock. Redisson's waiters are not
 * in latchkey's queue: they listen on the unlock channel and try when they hear `0`. The release
 * script leaves every third free to them while they listen (docs/semantics.md, "Redisson
 * compatibility"). Redisson's side is played with its own scripts, command for command.
 */

/** Hand-overs to latchkey's queue in a row while a foreign waiter listens (foreign-waiters.lua). */
const FOREIGN_HANDOVERS = 2;
const LATCHKEY_CONTENDERS = 3;
const HOLD_MS = 5;

// The kinds whose release hands the lock over: both share Redisson's RLock hash and channel.
describe.each(['lock', 'fencedLock'] as const)(
  'a mixed fleet of %s: latchkey and Redisson waiters on one lock',
  (kind) => {
    let url: string;
    let admin: Redis;
    let redis: LockConnection;
    const perFile = testResources(() => url);
    const res = testResources(() => url);

    beforeAll(async () => {
      ({ url } = await sharedRedis());
      admin = await perFile.connect();
      redis = await perFile.connectLocks();
    });

    afterEach(() => res.closeAll());

    afterAll(() => perFile.closeAll());

    /**
     * Latchkey contenders on `name`, each with a LockClient (a subscriber and grant channel) of its
     * own, taking the lock for HOLD_MS one after another until `stop`; `acquired` counts their
     * acquisitions.
     */
    function contend(
      prefix: string,
      name: string,
    ): { acquired: () => number; stop: () => Promise<void>; lock: Lock | FencedLock } {
      let acquired = 0;
      let running = true;
      const locks = Array.from({ length: LATCHKEY_CONTENDERS }, () =>
        res.track(new LockClient(redis, { keyPrefix: prefix }))[kind](name),
      );
      const loops = locks.map(async (lock) => {
        while (running) {
          const lease = await lock.acquire({ waitMs: 30_000 });
          acquired += 1;
          await sleep(HOLD_MS);
          await lease.release();
        }
      });
      return {
        acquired: () => acquired,
        stop: async () => {
          running = false;
          await Promise.all(loops);
        },
        lock: locks[0] as Lock | FencedLock,
      };
    }

    /**
     * One waiter of Redisson's protocol: subscribes to the unlock channel, tries, and on each `0`
     * (or when the holder's lease would run out) tries again; once it has the lock it stops
     * listening, holds it HOLD_MS and releases it with Redisson's script. Says how many `0`
     * messages it heard before it got the lock, and how far `acquired` (latchkey's acquisitions)
     * moved from the moment it listened to the moment it had the lock.
     */
    async function redissonWaiter(
      key: string,
      acquired: () => number,
    ): Promise<{ heard: number; handed: number }> {
      const channel = redissonChannel(key);
      const field = `${randomUUID()}:1`;
      const subscriber = await res.connect();
      let heard = 0;
      let wake: () => void = () => undefined;
      await subscriber.subscribe(channel, (message) => {
        if (message !== '0') return;
        heard += 1;
        wake();
      });
      // The subscription is live on the server once SUBSCRIBE has answered.
      const listening = acquired();
      let handed = 0;
      try {
        for (;;) {
          const seen = heard;
          const pttl = await redissonTryLock(admin, key, field);
          if (pttl === null) {
            handed = acquired() - listening;
            break;
          }
          if (heard !== seen) continue;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, Math.max(1, Number(pttl)));
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = () => undefined;
        }
      } finally {
        await subscriber.unsubscribe(channel);
      }
      await sleep(HOLD_MS);
      const released = await redissonUnlock(admin, key, field);
      expect(released).toBe(1);
      return { heard, handed };
    }

    it('a Redisson waiter gets the lock after at most 2 hand-overs to latchkey, round after round', async () => {
      const prefix = uniquePrefix('fleet-fair');
      const fleet = contend(prefix, 'ledger');
      try {
        await waitUntil('latchkey contending', () => fleet.acquired() >= 10);
        for (let round = 0; round < 5; round += 1) {
          const { heard, handed } = await within(
            redissonWaiter(fleet.lock.key, fleet.acquired),
            10_000,
            'the Redisson waiter',
          );
          // Each `0` it heard was a free left to it, after at most 2 hand-overs. One grant may have
          // been on its way to a latchkey contender when it began to listen. A turn it missed
          // (more than 100 ms to answer, on a busy machine) went to latchkey when the reservation
          // ran out: one acquisition more, then 2 hand-overs and a `0` more.
          expect(heard).toBeGreaterThanOrEqual(1);
          expect(handed).toBeLessThanOrEqual(FOREIGN_HANDOVERS + 1 + (FOREIGN_HANDOVERS + 1) * (heard - 1));
          const after = fleet.acquired();
          await waitUntil('latchkey contending again', () => fleet.acquired() >= after + 3);
        }
      } finally {
        await fleet.stop();
      }
    });

    it('with no one else listening, every release hands the lock to the queue', async () => {
      const prefix = uniquePrefix('fleet-alone');
      const fleet = contend(prefix, 'ledger');
      const key = fleet.lock.key;
      const channel = redissonChannel(key);
      try {
        await waitUntil('latchkey contending', () => fleet.acquired() >= 5);
        const before = fleet.acquired();
        let reserved = 0;
        while (fleet.acquired() < before + 60) {
          // latchkey's listeners on the channel are all matched by its presence twin.
          const counts = await admin.sendCommand<[string, number, string, number]>([
            'PUBSUB',
            'NUMSUB',
            channel,
            `latchkey_present:${channel}`,
          ]);
          expect(counts[1]).toBeGreaterThan(0);
          expect(counts[1]).toBeLessThanOrEqual(counts[3]);
          if ((await admin.exists(`latchkey_foreign:{${key}}`)) === 1) reserved += 1;
          await sleep(2);
        }
        expect(reserved).toBe(0);
      } finally {
        await fleet.stop();
      }
    });

    it('a free left to foreign waiters goes to latchkey at once when they stop listening', async () => {
      const prefix = uniquePrefix('fleet-left');
      const fleet = contend(prefix, 'ledger');
      const key = fleet.lock.key;
      const channel = redissonChannel(key);
      try {
        await waitUntil('latchkey contending', () => fleet.acquired() >= 5);
        // A listener that never tries: latchkey leaves the lock to it every third release, for up
        // to 100 ms each time.
        const bystander = await res.connect();
        await bystander.subscribe(channel, () => undefined);
        await waitUntil(
          'a free left to the listener',
          async () => (await admin.get(`latchkey_foreign:{${key}}`)) === channel,
        );
        const startedAt = performance.now();
        const before = fleet.acquired();
        await bystander.unsubscribe(channel);
        // No foreign listener remains: the reservation no longer holds, and the waiter that was
        // passed over takes the lock when it next tries (at the reservation's end at the latest).
        await waitUntil('latchkey acquiring again', () => fleet.acquired() > before);
        expect(performance.now() - startedAt).toBeLessThan(5_000);
      } finally {
        await fleet.stop();
      }
    });
  },
);
