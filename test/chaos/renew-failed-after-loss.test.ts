/**
 * While Redis is frozen (SIGSTOP of the test's own redis-server) for longer than a watchdog
 * lease, the watchdog's renewals time out and are retried, and the holds run past their
 * deadlines and are declared lost. `renewFailed` reports only locks that are still held: once a
 * lock was reported in `lockLost`, no later `renewFailed` names it, for every kind with leases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KINDS, type Kind } from '../support/kinds.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources } from '../support/resources.js';
import { sleep, waitUntil } from '../support/wait.js';

const WATCHDOG_MS = 600;
const LOCKS = ['batch:1', 'batch:2', 'batch:3'];
/** Freezes tried per kind until one sees a renewal fail while its lock is still held. */
const ROUNDS = 4;

describe('renewFailed never names a lock already reported lost', () => {
  let server: RedisInstance;
  const res = testResources(() => server.url);

  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await res.closeAll();
    await server?.stop();
  });

  /**
   * One freeze past the leases of fresh holds of `kind`: checks that no `renewFailed` named a
   * lock after its `lockLost`, and says whether any `renewFailed` was emitted at all.
   */
  async function freezePastLeases(kind: Kind, round: number): Promise<boolean> {
    const locks = await res.lockClient({
      keyPrefix: uniquePrefix(`renew-failed-${kind.name}-${round}`),
      watchdogTimeoutMs: WATCHDOG_MS,
      commandTimeoutMs: 1_000,
    });
    const events: { type: 'lost' | 'renewFailed'; names: readonly string[] }[] = [];
    locks.on('lockLost', (event) => events.push({ type: 'lost', names: [event.name] }));
    locks.on('renewFailed', (event) => events.push({ type: 'renewFailed', names: event.names }));
    const leases = await Promise.all(LOCKS.map((name) => kind.handle(locks, name).acquire()));
    await server.pause();
    try {
      // Retries go on every 50 ms while Redis is frozen, before and after the leases run out.
      await waitUntil(
        'every lease was declared lost',
        () => leases.every((lease) => lease.signal.aborted),
        10_000,
      );
      // A renewal call under way at the loss times out within a renewal interval.
      await sleep(4 * (WATCHDOG_MS / 3));
    } finally {
      await server.resume();
    }
    const reported = new Set<string>();
    for (const event of events) {
      if (event.type === 'lost') reported.add(event.names[0] ?? '');
      else expect(event.names.filter((name) => reported.has(name))).toEqual([]);
    }
    expect([...reported].sort()).toEqual(LOCKS);
    return events.some((event) => event.type === 'renewFailed');
  }

  it.each(KINDS)('$name', async (kind) => {
    // A renewal fails (its call times out) a third of a lease before the hold runs out. On a
    // machine busy enough to run the watchdog's timers that late, the loss comes first and no
    // renewal fails while the lock is held: the freeze is then tried again, so that the check
    // above is made on at least one renewFailed.
    let renewFailed = false;
    for (let round = 0; round < ROUNDS && !renewFailed; round += 1) {
      renewFailed = await freezePastLeases(kind, round);
    }
    expect(renewFailed).toBe(true);
  });
});
