/**
 * While Redis is frozen (SIGSTOP of the test's own redis-server) for longer than a watchdog
 * lease, the watchdog's renewals time out and are retried, and the holds run past their
 * deadlines and are declared lost. `renewFailed` reports only locks that are still held: once a
 * lock was reported in `lockLost`, no later `renewFailed` names it, for every kind with leases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KINDS } from '../support/kinds.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources } from '../support/resources.js';
import { sleep, waitUntil } from '../support/wait.js';

const WATCHDOG_MS = 600;
const LOCKS = ['batch:1', 'batch:2', 'batch:3'];

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

  it.each(KINDS)('$name', async (kind) => {
    const locks = await res.lockClient({
      keyPrefix: uniquePrefix(`renew-failed-${kind.name}`),
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
    expect(events.some((event) => event.type === 'renewFailed')).toBe(true);
  });
});
