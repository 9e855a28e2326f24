/**
 * Waiting through an outage, run over every kind (test/support/every-kind.ts): Redis is frozen
 * with SIGSTOP for 3.5 s (longer than three command timeouts: every call sent meanwhile times out
 * and is retried) while two waits start on a client that has talked to Redis before: one with no
 * end (`waitMs: Infinity`, the default of `acquire` and `await`) on something available, one with
 * `waitMs: 20000` on something another client blocks. Neither may give up while its wait lasts:
 * the first gets in once Redis answers, the second once the block is lifted after the freeze.
 * Afterwards Redis holds what it would have held had nothing been retried: the available one as
 * it was before its wait, the blocked one as a block lifted with nobody waiting leaves it — so a
 * semaphore's counter is back at its permits (an acquire whose reply was lost in the freeze took
 * its permits once, or gave them back). And a wait whose `waitMs` runs out while Redis is still
 * frozen ends by its `waitMs` plus one command timeout, with a `REDIS_ERROR` (or the kind's timeout,
 * had a last try got through), and leaves nothing taken once Redis answers.
 */
import { describe, expect, it } from 'vitest';
import { LockError } from '../../src/index.js';
import {
  EVERY_KIND,
  LatchClosed,
  residue,
  skips,
  titled,
  type Scene,
  type Waitable,
} from '../support/every-kind.js';
import { uniquePrefix } from '../support/keys.js';
import { watchEventLoopDelay } from '../support/stamps.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';
import { ownServer } from './own-server.js';

const FREEZE_MS = 3_500;
const WAIT_MS = 20_000;
/** The client's default, spelt out: the freeze lasts more than three of them. */
const COMMAND_TIMEOUT_MS = 1_000;
/**
 * How soon after Redis answers again (or the block is lifted) a wait gets in: a retry's backoff
 * (at most 1 s) plus one command timeout, and as much again for a loaded machine.
 */
const GETS_IN_WITHIN_MS = 2 * (1_000 + COMMAND_TIMEOUT_MS);
/** How long the clean-up of calls given up during the freeze may take once Redis answers. */
const CLEAN_WITHIN_MS = 5_000;
/** A wait that runs out during a freeze longer than it and its command timeout together. */
const SHORT_WAIT_MS = 1_500;
const SHORT_COMMAND_TIMEOUT_MS = 500;

describe('Waiting through a Redis outage', () => {
  const env = ownServer();
  const { res } = env;

  /** The residue of `scene`'s key with its name replaced, to compare two names' leftovers. */
  async function leftOf(scene: Scene): Promise<string[]> {
    const entries = await residue(env.admin, scene.key);
    return entries.map((entry) => entry.split(scene.key).join('<key>'));
  }

  describe.each(EVERY_KIND)('$name', (waitable: Waitable) => {
    const title = `keeps waiting through a ${FREEZE_MS} ms freeze and gets in once Redis answers`;
    it.skipIf(skips(waitable, 'outage'))(
      titled(waitable, 'outage', title),
      async () => {
        const keyPrefix = uniquePrefix(`outage-wait-${waitable.name}`);
        const options = { keyPrefix, commandTimeoutMs: COMMAND_TIMEOUT_MS };
        const locks = await res.lockClient(options);
        const holder = await res.lockClient(options);
        const other = await res.lockClient(options);
        const scene = (name: string): Scene => ({
          holder,
          other,
          admin: env.admin,
          name,
          key: keyPrefix + name,
        });
        const [available, blocked, control, warm] = ['available', 'blocked', 'control', 'warm-up'].map(scene);
        if (available === undefined || blocked === undefined || control === undefined || warm === undefined) {
          throw new Error('no scenes');
        }
        // The waiting client has talked to Redis before: its server check is behind it.
        await waitable.available(warm);
        await (await waitable.wait(locks, warm.name, { waitMs: 5_000 })).give();
        // What a block lifted with nobody waiting leaves behind.
        await (await waitable.frees[0].block(control)).free();
        await waitable.available(available);
        const availableBefore = await leftOf(available);
        const block = await waitable.frees[0].block(blocked);

        await env.server.pause();
        let resumedAt = Number.NaN;
        let blockedEnded = false;
        const gotAvailable = settle(
          waitable.wait(locks, available.name, { waitMs: Number.POSITIVE_INFINITY }),
        );
        const gotBlocked = settle(waitable.wait(locks, blocked.name, { waitMs: WAIT_MS })).finally(() => {
          blockedEnded = true;
        });
        try {
          await sleep(FREEZE_MS);
        } finally {
          await env.server.resume();
          resumedAt = performance.now();
        }

        const first = await within(gotAvailable, WAIT_MS, 'the wait for the available one');
        expect(first.error).toBeUndefined();
        const firstLag = Math.round(first.at - resumedAt);
        expect(firstLag).toBeLessThan(GETS_IN_WITHIN_MS);
        // The other one still waits for its block to be lifted, past the freeze.
        expect(blockedEnded).toBe(false);

        const liftedAt = performance.now();
        await block.free();
        const second = await within(gotBlocked, WAIT_MS, 'the wait for the blocked one');
        expect(second.error).toBeUndefined();
        const secondLag = Math.round(second.at - liftedAt);
        expect(secondLag).toBeLessThan(GETS_IN_WITHIN_MS);

        await first.value?.give();
        await second.value?.give();
        const expected = { available: availableBefore, blocked: await leftOf(control) };
        const left = async (): Promise<{ available: string[]; blocked: string[] }> => ({
          available: await leftOf(available),
          blocked: await leftOf(blocked),
        });
        // Calls given up during the freeze are cleaned up by now or soon after...
        await waitUntil(
          'both are left as if nothing had been retried',
          async () => JSON.stringify(await left()) === JSON.stringify(expected),
          CLEAN_WITHIN_MS,
        ).catch(() => undefined);
        expect(await left()).toEqual(expected);
        // ...and stay so: no late copy of a call changes them.
        await sleep(500);
        expect(await left()).toEqual(expected);
        expect(env.unhandled).toEqual([]);
        console.info(
          `[outage-wait] ${waitable.name}: in ${firstLag} ms after Redis answered; ` +
            `the blocked one ${secondLag} ms after its block was lifted`,
        );
      },
      60_000,
    );

    const endTitle =
      'a wait that runs out while Redis is frozen ends by waitMs plus the command timeout, ' +
      'says why, and leaves nothing taken';
    it.skipIf(skips(waitable, 'outage'))(
      titled(waitable, 'outage', endTitle),
      async () => {
        const keyPrefix = uniquePrefix(`outage-end-${waitable.name}`);
        const options = { keyPrefix, commandTimeoutMs: SHORT_COMMAND_TIMEOUT_MS };
        const locks = await res.lockClient(options);
        const holder = await res.lockClient(options);
        const scene = (name: string): Scene => ({
          holder,
          other: holder,
          admin: env.admin,
          name,
          key: keyPrefix + name,
        });
        const [available, warm] = ['available', 'warm-up'].map(scene);
        if (available === undefined || warm === undefined) throw new Error('no scenes');
        await waitable.available(warm);
        await (await waitable.wait(locks, warm.name, { waitMs: 5_000 })).give();
        await waitable.available(available);
        const before = await leftOf(available);

        await env.server.pause();
        const lateness = watchEventLoopDelay();
        const startedAt = performance.now();
        let ended;
        try {
          ended = await within(
            settle(waitable.wait(locks, available.name, { waitMs: SHORT_WAIT_MS })),
            SHORT_WAIT_MS + 10_000,
            'the wait while Redis is frozen',
          );
        } finally {
          lateness.stop();
          await env.server.resume();
        }
        const tookMs = Math.round(ended.at - startedAt);
        // Every call ends by its waitMs plus one command timeout, whatever Redis does; plus how
        // late this process's timers ran meanwhile.
        expect(tookMs).toBeLessThanOrEqual(SHORT_WAIT_MS + SHORT_COMMAND_TIMEOUT_MS + lateness.maxMs() + 50);
        // It says why: Redis did not answer (or, had a last try got through, that the wait ran out).
        const error = ended.error;
        const why =
          error instanceof LockError ? error.code : error instanceof LatchClosed ? 'closed' : String(error);
        expect(['REDIS_ERROR', 'ACQUIRE_TIMEOUT', 'closed']).toContain(why);
        expect(ended.value).toBeUndefined();

        // Whatever a try sent during the freeze may have taken is given back once Redis answers.
        await waitUntil(
          'the available one is left as it was',
          async () => JSON.stringify(await leftOf(available)) === JSON.stringify(before),
          CLEAN_WITHIN_MS,
        ).catch(() => undefined);
        expect(await leftOf(available)).toEqual(before);
        await sleep(500);
        expect(await leftOf(available)).toEqual(before);
        await (await waitable.wait(locks, available.name, { waitMs: 0 })).give();
        expect(env.unhandled).toEqual([]);
        console.info(
          `[outage-wait] ${waitable.name}: ended after ${tookMs} ms (${why}) with waitMs ${SHORT_WAIT_MS}`,
        );
      },
      60_000,
    );
  });
});
