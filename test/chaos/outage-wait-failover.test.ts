/**
 * Waiting through a Sentinel failover, for every kind at once (test/support/every-kind.ts): on a
 * master with two replicas and three sentinels, one wait per kind (on something available, with a
 * `waitMs` longer than the longest election the harness allows) starts right after the master is
 * killed with kill -9, through a node-redis `createSentinel` client that has talked to the old
 * master before. No wait may give up while the sentinels elect a new master: each gets in once the
 * client follows it, and what it took can be given back and taken again (a semaphore's permit
 * was taken once, not leaked).
 */
import { createSentinel } from 'redis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, type LockClientOptions } from '../../src/index.js';
import { EVERY_KIND, skips, type Got, type Scene } from '../support/every-kind.js';
import { uniquePrefix } from '../support/keys.js';
import { MASTER_NAME, startReplicated, type Replicated } from '../support/replication.js';
import type { Redis } from '../support/resources.js';
import { settle, within } from '../support/wait.js';

type Sentinel = ReturnType<typeof createSentinel>;

/**
 * Longer than a failover may take: the harness waits up to 30 s for the sentinels to name a new
 * master, and a busy machine has been seen to take 20 s.
 */
const WAIT_MS = 60_000;
const KINDS = EVERY_KIND.filter((waitable) => !skips(waitable, 'outage'));

describe('Waiting through a Sentinel failover', () => {
  let cluster: Replicated;
  const sentinels: Sentinel[] = [];
  const lockClients: LockClient[] = [];

  async function locksOn(options: LockClientOptions): Promise<LockClient> {
    const sentinel = createSentinel({
      name: MASTER_NAME,
      sentinelRootNodes: [...cluster.sentinelRootNodes],
      scanInterval: 200,
    });
    sentinel.on('error', () => undefined);
    await sentinel.connect();
    sentinels.push(sentinel);
    const locks = new LockClient(sentinel, options);
    locks.on('error', () => undefined);
    lockClients.push(locks);
    return locks;
  }

  beforeAll(async () => {
    cluster = await startReplicated();
  }, 60_000);

  afterEach(async () => {
    // Each bounded and named, so that a close that hangs says whose it is.
    await Promise.all(
      lockClients
        .splice(0)
        .map((locks, index) => within(locks.close(), 10_000, `LockClient ${index}'s close()`)),
    );
    await Promise.all(
      sentinels.splice(0).map((sentinel, index) =>
        within(
          sentinel.close().catch(() => sentinel.destroy()),
          10_000,
          `node-redis Sentinel client ${index}'s close()`,
        ),
      ),
    );
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  const names = KINDS.map((waitable) => waitable.name).join(', ');
  it(
    `every kind's wait (${names}) gets in after the master is killed and replaced`,
    async () => {
      const keyPrefix = uniquePrefix('outage-failover');
      // What makes something available (a semaphore's counter) reaches both replicas before the
      // master dies, so the new master has it.
      const holder = await locksOn({ keyPrefix, syncReplicas: { count: 2, timeoutMs: 5_000 } });
      const waiter = await locksOn({ keyPrefix, commandTimeoutMs: 1_000 });
      const scene = (name: string): Scene => ({
        holder,
        other: holder,
        // No fixture's `available` reads it; the test has no connection of its own to a master
        // that changes.
        admin: undefined as unknown as Redis,
        name,
        key: keyPrefix + name,
      });
      for (const waitable of KINDS) {
        const warm = scene(`${waitable.name}:warm-up`);
        await waitable.available(warm);
        await (await waitable.wait(waiter, warm.name, { waitMs: 5_000 })).give();
        await waitable.available(scene(waitable.name));
      }

      let waits: Promise<{ readonly got?: Got; readonly error?: unknown; readonly at: number }>[] = [];
      const { from, to } = await cluster.failover({
        revive: false,
        afterKill: () => {
          waits = KINDS.map((waitable) =>
            settle(waitable.wait(waiter, waitable.name, { waitMs: WAIT_MS })).then((settled) => ({
              ...(settled.value === undefined ? {} : { got: settled.value }),
              ...('error' in settled ? { error: settled.error } : {}),
              at: settled.at,
            })),
          );
        },
      });
      const newMasterAt = performance.now();
      expect(to).not.toBe(from);

      const outcomes = await within(Promise.all(waits), WAIT_MS + 5_000, 'the waits across the failover');
      const failed = KINDS.flatMap((waitable, index) => {
        const error = outcomes[index]?.error;
        return error === undefined
          ? []
          : [`${waitable.name}: ${error instanceof Error ? error.message : 'no error'}`];
      });
      expect(failed).toEqual([]);
      for (const [index, waitable] of KINDS.entries()) {
        const got = outcomes[index]?.got;
        if (got === undefined) throw new Error(`${waitable.name}: the wait got nothing`);
        await got.give();
        // Given back once: available again at once, nothing taken twice or left behind.
        await (await waitable.wait(waiter, waitable.name, { waitMs: 0 })).give();
      }
      const lags = KINDS.map(
        (waitable, index) =>
          `${waitable.name} ${Math.round((outcomes[index]?.at ?? Number.NaN) - newMasterAt)}`,
      );
      console.info(`[outage-wait-failover] ms after the new master answered: ${lags.join(', ')}`);
    },
    WAIT_MS + 60_000,
  );
});
