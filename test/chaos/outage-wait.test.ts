/**
 * Waiting through an outage, for every kind that waits: the seven lock kinds, the semaphore and
 * the count-down latch. Redis is frozen with SIGSTOP for 3.5 s (longer than three command
 * timeouts: every call sent meanwhile times out and is retried) while two waits start on a
 * client that has talked to Redis before: one with no end (`waitMs: Infinity`, the default of
 * `acquire` and `await`) on something free, one with `waitMs: 20000` on something another client
 * holds. Neither may give up while its wait lasts: the first gets in once Redis answers, the
 * second once the holder lets go after the freeze. Afterwards every kind's state in Redis is as
 * if no call had been retried: no hold left behind, and a semaphore's counter back at its permits
 * (an acquire whose reply was lost in the freeze is applied once, or given back).
 */
import { describe, expect, it } from 'vitest';
import type { LockClient } from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { KINDS, WRITE_LOCK } from '../support/kinds.js';
import type { Redis } from '../support/resources.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';
import { ownServer } from './own-server.js';

const FREEZE_MS = 3_500;
const WAIT_MS = 20_000;
/** The client's default, spelt out: the freeze lasts more than three of them. */
const COMMAND_TIMEOUT_MS = 1_000;
/**
 * How soon after Redis answers again a wait gets in: a retry's backoff (at most 1 s) plus one
 * command timeout, plus as much again for a loaded machine.
 */
const AFTER_RESUME_MS = 2 * (1_000 + COMMAND_TIMEOUT_MS);

/** Something held or waited for; `free` gives it back. */
interface Taken {
  free(): Promise<void>;
}

/** A kind that waits, as this test drives it. */
interface Waiting {
  readonly name: string;
  /** Takes `name` so that a wait for it must wait. */
  hold(locks: LockClient, name: string): Promise<Taken>;
  /** Waits for `name` up to `waitMs`; rejects when the wait ends without it. */
  wait(locks: LockClient, name: string, waitMs: number): Promise<Taken>;
  /** Whether Redis holds nothing of `name` but what a kind keeps when idle. */
  idle(admin: Redis, key: string): Promise<boolean>;
}

const LOCK_KINDS: Waiting[] = KINDS.map((kind) => ({
  name: kind.name,
  async hold(locks, name) {
    // Readers share a read lock: a reader waits for a writer.
    const lease = await (kind.exclusive ? kind : WRITE_LOCK).handle(locks, name).acquire();
    return { free: () => lease.release() };
  },
  async wait(locks, name, waitMs) {
    const lease = await kind.handle(locks, name).acquire({ waitMs });
    return { free: () => lease.release() };
  },
  idle: async (admin, key) => (await kind.inspect(admin, key)).owners === 0,
}));

/** One permit, so that it excludes as a lock does. */
const SEMAPHORE: Waiting = {
  name: 'semaphore',
  async hold(locks, name) {
    const semaphore = locks.semaphore(name, { permits: 1 });
    await semaphore.acquire();
    return { free: () => semaphore.release() };
  },
  async wait(locks, name, waitMs) {
    const semaphore = locks.semaphore(name, { permits: 1 });
    await semaphore.acquire({ waitMs });
    return { free: () => semaphore.release() };
  },
  // Exactly its one permit free: none leaked, none given twice.
  idle: async (admin, key) => (await admin.get(key)) === '1',
};

/** Held: a count of 1 to go. Waiting: `await` until it reaches zero. */
const LATCH: Waiting = {
  name: 'countDownLatch',
  async hold(locks, name) {
    const latch = locks.countDownLatch(name);
    if (!(await latch.trySetCount(1))) throw new Error(`latch "${name}" was set already`);
    return {
      free: async () => {
        await latch.countDown();
      },
    };
  },
  async wait(locks, name, waitMs) {
    if (!(await locks.countDownLatch(name).await({ waitMs }))) {
      throw new Error(`latch "${name}" did not open within ${waitMs} ms`);
    }
    return { free: () => Promise.resolve() };
  },
  idle: async (admin, key) => (await admin.exists(key)) === 0,
};

const WAITING: readonly Waiting[] = [...LOCK_KINDS, SEMAPHORE, LATCH];

describe('Waiting through a Redis outage', () => {
  const env = ownServer();
  const { res } = env;

  describe.each(WAITING)('$name', (kind) => {
    it(`keeps waiting through a ${FREEZE_MS} ms freeze and gets in once Redis answers`, async () => {
      const prefix = uniquePrefix('outage-wait');
      const options = { keyPrefix: prefix, commandTimeoutMs: COMMAND_TIMEOUT_MS };
      const locks = await res.lockClient(options);
      const holder = await res.lockClient(options);
      // The waiting client has talked to Redis before (its server check is behind it).
      await (await kind.wait(locks, 'warm-up', 0)).free();
      const held = await kind.hold(holder, 'busy');

      await env.server.pause();
      let resumedAt = Number.NaN;
      let busyEnded = false;
      const free = settle(kind.wait(locks, 'free', Number.POSITIVE_INFINITY));
      const busy = settle(kind.wait(locks, 'busy', WAIT_MS)).finally(() => {
        busyEnded = true;
      });
      try {
        await sleep(FREEZE_MS);
      } finally {
        await env.server.resume();
        resumedAt = performance.now();
      }

      const gotFree = await within(free, WAIT_MS, 'the wait for the free one');
      expect(gotFree.error).toBeUndefined();
      const freeLag = Math.round(gotFree.at - resumedAt);
      expect(freeLag).toBeLessThan(AFTER_RESUME_MS);
      // The other one still waits for its holder, past the freeze.
      expect(busyEnded).toBe(false);

      const freedAt = performance.now();
      await held.free();
      const gotBusy = await within(busy, WAIT_MS, 'the wait for the held one');
      expect(gotBusy.error).toBeUndefined();
      const busyLag = Math.round(gotBusy.at - freedAt);
      expect(busyLag).toBeLessThan(AFTER_RESUME_MS);

      await gotFree.value?.free();
      await gotBusy.value?.free();
      // Calls given up during the freeze (and their clean-up) are done by now or soon.
      for (const name of ['free', 'busy']) {
        await waitUntil(`"${name}" is left as it was`, () => kind.idle(env.admin, prefix + name), 5_000);
      }
      // And stay done: nothing late changes them.
      await sleep(500);
      for (const name of ['free', 'busy']) expect(await kind.idle(env.admin, prefix + name)).toBe(true);
      expect(env.unhandled).toEqual([]);
      console.info(
        `[outage-wait] ${kind.name}: in ${freeLag} ms after Redis answered; ` +
          `the held one ${busyLag} ms after its holder let go`,
      );
    }, 60_000);
  });
});
