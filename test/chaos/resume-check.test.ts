/**
 * A holder's first check of its lease after a stall longer than the lease, for every kind with
 * leases (test/support/kinds.ts): the holder, a real Node process with `leaseMs`, is frozen
 * (SIGSTOP) while a read of the resource is in flight, frozen while idle with a timer of its own
 * due, or has its event loop blocked by synchronous work, while a rival in the test takes the
 * lock. Whatever runs first when the holder resumes — the read's reply, its own timer, the code
 * after the blocking work — reads the lease as lost: `signal.aborted`, `signal.reason`,
 * `signal.throwIfAborted()` and `holdCount` agree, before the client's expiry timer has had a
 * turn. Its release is refused and leaves the rival's hold alone.
 *
 * Each scenario depends only on the order of events, not on how fast the machine is: the test
 * resumes the holder only once the rival holds the lock, and every check happens after more than
 * a lease has passed by the holder's own clock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerMessage, Worker } from '../support/child.js';
import { KINDS, type Kind, type KindHandle } from '../support/kinds.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { waitUntil } from '../support/wait.js';
import type { Lease, LockClient } from '../../src/index.js';

const CHECKER = new URL('./fixtures/resume-checker.ts', import.meta.url).pathname;
const LEASE_MS = 1_000;
const LOCK_NAME = 'payroll:close';
// Worker start (tsx) and each scenario's waits, generous for a loaded machine.
const STARTUP_MS = 20_000;
const SCENARIO_MS = 4 * LEASE_MS + 15_000;

/** A rival of the holder: a writer for a read lock (readers share it), else the same kind. */
function rivalOf(kind: Kind, locks: LockClient): KindHandle {
  return kind.name === 'readLock'
    ? locks.readWriteLock(LOCK_NAME).writeLock()
    : kind.handle(locks, LOCK_NAME);
}

function expectLost(checked: WorkerMessage): void {
  expect(checked['sinceAcquiredMs']).toBeGreaterThan(LEASE_MS);
  expect({
    aborted: checked['aborted'],
    threw: checked['threw'],
    reason: checked['reason'],
    holdCount: checked['holdCount'],
  }).toEqual({ aborted: true, threw: 'LockLostError', reason: 'expired', holdCount: 0 });
}

describe.each(KINDS)('a holder frozen past its lease checks it first thing on resuming: $name', (kind) => {
  let server: RedisInstance;
  let admin: Redis;
  let holder: Worker;
  let rival: KindHandle;
  const res = testResources(() => server.url);

  // One holder process and one rival for the kind's three scenarios, each of which ends with
  // the lock free.
  beforeAll(async () => {
    server = await startRedis();
    admin = await res.connect();
    const prefix = uniquePrefix(`resume-${kind.name}`);
    holder = res.worker(CHECKER, { REDIS_URL: server.url, KEY_PREFIX: prefix, KIND: kind.name, LOCK_NAME });
    rival = rivalOf(kind, await res.lockClient({ keyPrefix: prefix }));
  }, STARTUP_MS);
  afterAll(async () => {
    await res.closeAll();
    await server?.stop();
  });

  /** The holder holding the lock with a lease of LEASE_MS. */
  async function holding(): Promise<void> {
    holder.send({ type: 'acquire', leaseMs: LEASE_MS });
    await holder.next((msg) => msg['type'] === 'acquired', STARTUP_MS);
  }

  /** Freezes the holder, lets the rival take the lock once the lease ran out, and thaws the holder. */
  async function frozenWhileRivalTakesOver(): Promise<Lease> {
    holder.kill('SIGSTOP');
    try {
      return await rival.acquire({ waitMs: SCENARIO_MS });
    } finally {
      holder.kill('SIGCONT');
    }
  }

  async function releaseIsRefused(rivalLease: Lease): Promise<void> {
    holder.send({ type: 'release' });
    const released = await holder.next((msg) => msg['type'] === 'released');
    expect(released['refused']).toBe('LockNotOwnedError');
    expect(rivalLease.signal.aborted).toBe(false);
    await rivalLease.release();
  }

  it(
    'frozen while a read of the resource is in flight: the read reply callback reads the lease lost',
    async () => {
      await holding();
      const list = `${LOCK_NAME}:reads:${kind.name}`;
      holder.send({ type: 'read', list });
      await holder.next((msg) => msg['type'] === 'reading');
      // The read is in flight once Redis has the BLPOP parked.
      await waitUntil('the read is parked in Redis', async () =>
        /blocked_clients:[1-9]/.test(await admin.info('clients')),
      );
      const rivalLease = await (async () => {
        holder.kill('SIGSTOP');
        try {
          const lease = await rival.acquire({ waitMs: SCENARIO_MS });
          // The read's reply is waiting in the holder's socket when it resumes.
          await admin.lPush(list, 'row');
          return lease;
        } finally {
          holder.kill('SIGCONT');
        }
      })();
      expectLost(await holder.next((msg) => msg['type'] === 'checked', SCENARIO_MS));
      await releaseIsRefused(rivalLease);
    },
    SCENARIO_MS,
  );

  it(
    'frozen while idle with a timer of its own due: the timer callback reads the lease lost',
    async () => {
      await holding();
      // Due long before the client's expiry timer, so it runs first after the thaw.
      holder.send({ type: 'timer', ms: 100 });
      await holder.next((msg) => msg['type'] === 'armed');
      const rivalLease = await frozenWhileRivalTakesOver();
      expectLost(await holder.next((msg) => msg['type'] === 'checked', SCENARIO_MS));
      await releaseIsRefused(rivalLease);
    },
    SCENARIO_MS,
  );

  it(
    'its event loop blocked past its lease: the code right after the blocking work reads the lease lost',
    async () => {
      await holding();
      const rivalAcquired = rival.acquire({ waitMs: SCENARIO_MS });
      holder.send({ type: 'block', ms: 2 * LEASE_MS });
      expectLost(await holder.next((msg) => msg['type'] === 'checked', SCENARIO_MS));
      await releaseIsRefused(await rivalAcquired);
    },
    SCENARIO_MS,
  );
});
