/**
 * Faults of read-lock holders while a writer waits, with the readers as real Node processes:
 *   - one reader SIGKILLed and one frozen (SIGSTOP) past its lease: the waiting writer gets in
 *     within one lease of the faults, and the frozen reader, thawed, learns of the loss on its
 *     lease signal;
 *   - a reader frozen past its lease while a live reader keeps the hash alive: the writer still
 *     waits for the live reader, and gets in as soon as that one leaves, though the frozen
 *     reader's field was still in the hash;
 *   - a waiting writer SIGKILLed: the new readers it held back get in once its entry in the
 *     waiting writers lapses (the writer timeout, 10 s), and the entry is gone.
 * Throughout, an observer reads the lock and checks the invariant: never a writer beside a
 * reader (other than its own, from a downgrade, which these tests do not do), never two writers.
 */
import { describe, expect, it } from 'vitest';
import type { Worker } from '../support/child.js';
import { sharedSuite } from '../support/shared-suite.js';
import type { Redis } from '../support/resources.js';
import { sleep, waitUntil, within } from '../support/wait.js';
import { scaled } from './scale.js';

const WORKER = 'test/support/fixtures/read-write-worker.ts';
const LEASE_MS = scaled(1_000, 1_500);
/** How late after a lease runs out the waiting writer may get in, on a loaded machine. */
const TAKEOVER_SLACK_MS = 1_000;
const STARTUP_MS = 20_000;
/** How long a waiting writer's entry lives after its last attempt (the protocol's constant). */
const WRITER_TIMEOUT_MS = 10_000;

/** Reads the lock every few milliseconds and records every state that breaks the invariant. */
function watchInvariant(admin: Redis, key: string): { stop: () => Promise<string[]>; reads: () => number } {
  const violations: string[] = [];
  let running = true;
  let reads = 0;
  const loop = (async () => {
    while (running) {
      const hash = await admin.hGetAll(key);
      reads += 1;
      const fields = Object.keys(hash).filter((field) => field !== 'mode');
      const writers = fields.filter((field) => field.endsWith(':write'));
      if (writers.length > 1) violations.push(`${writers.length} writers`);
      if (writers.length === 1 && fields.length > 1)
        violations.push(`a writer beside ${fields.length - 1} reader(s)`);
      if (writers.length === 1 && hash.mode !== 'write') violations.push(`a writer in mode ${hash.mode}`);
      await sleep(3);
    }
  })();
  return {
    reads: () => reads,
    stop: async () => {
      running = false;
      await loop;
      return violations;
    },
  };
}

describe('read-write lock: faults of readers while a writer waits', () => {
  const suite = sharedSuite('rw-faults');
  const { res, lockClient } = suite;

  async function reader(prefix: string, id: string): Promise<Worker> {
    const child = res.worker(WORKER, {
      REDIS_URL: suite.url,
      KEY_PREFIX: prefix,
      WATCHDOG_MS: String(LEASE_MS),
    });
    await child.next((m) => m.type === 'ready', STARTUP_MS);
    child.send({ type: 'acquire', id, name: 'ledger', mode: 'read', waitMs: 5_000 });
    expect((await child.next((m) => m.id === id, 10_000)).type).toBe('held');
    return child;
  }

  it('a killed reader and a frozen one: the waiting writer gets in within a lease; the frozen one learns it lost', async () => {
    const locks = lockClient({ watchdogTimeoutMs: LEASE_MS });
    const rw = locks.readWriteLock('ledger');
    const prefix = rw.key.slice(0, -rw.name.length);
    const [killed, frozen] = await Promise.all([reader(prefix, 'k'), reader(prefix, 'f')]);
    const invariant = watchInvariant(suite.admin, rw.key);
    try {
      const writing = rw.writeLock().acquire({ waitMs: 20_000 });
      await waitUntil(
        'the writer waits',
        async () => (await suite.admin.zCard(`latchkey_writers:{${rw.key}}`)) === 1,
      );
      // Let a renewal of both readers go through, so the faults land mid-lease.
      await sleep(LEASE_MS / 2);
      const faultAt = performance.now();
      killed.kill('SIGKILL');
      frozen.kill('SIGSTOP');

      const writer = await within(writing, LEASE_MS + TAKEOVER_SLACK_MS + 2_000, 'the writer');
      const waitedMs = performance.now() - faultAt;
      expect(waitedMs).toBeLessThan(LEASE_MS + TAKEOVER_SLACK_MS);
      expect(await suite.admin.hGet(rw.key, 'mode')).toBe('write');

      // Thawed two leases later, with the writer still in: the frozen reader learns it lost.
      await sleep(LEASE_MS);
      frozen.kill('SIGCONT');
      const lost = await frozen.next((m) => m.type === 'lost' && m.id === 'f', 5_000);
      expect(['expired', 'not-owner']).toContain(lost.reason);
      await sleep(LEASE_MS / 2);
      expect(writer.signal.aborted).toBe(false);
      await writer.release();
    } finally {
      const violations = await invariant.stop();
      expect(invariant.reads()).toBeGreaterThan(50);
      expect(violations).toEqual([]);
    }
    expect(await suite.admin.exists(rw.key)).toBe(0);
  }, 60_000);

  it('a reader frozen past its lease while a live reader keeps the hash alive: the writer waits for the live one only', async () => {
    const locks = lockClient({ watchdogTimeoutMs: LEASE_MS });
    const rw = locks.readWriteLock('ledger');
    const prefix = rw.key.slice(0, -rw.name.length);
    const frozen = await reader(prefix, 'f');
    const live = await rw.readLock().acquire();
    const invariant = watchInvariant(suite.admin, rw.key);
    try {
      const writing = rw.writeLock().acquire({ waitMs: 30_000 });
      let gotAt: number | undefined;
      void writing.then(
        () => (gotAt = performance.now()),
        () => undefined,
      );
      await waitUntil(
        'the writer waits',
        async () => (await suite.admin.zCard(`latchkey_writers:{${rw.key}}`)) === 1,
      );
      frozen.kill('SIGSTOP');
      // Three leases: the frozen reader's lease key lapses; the live reader's is renewed.
      await sleep(3 * LEASE_MS);
      expect(gotAt).toBeUndefined();
      expect(live.signal.aborted).toBe(false);
      expect(await suite.admin.keys(`{${rw.key}}:*:rwlock_timeout:*`)).toHaveLength(1);
      // The frozen reader's field is still in the hash: nothing of its own can drop it.
      expect(Object.keys(await suite.admin.hGetAll(rw.key)).sort()).toHaveLength(3);

      const releasedAt = performance.now();
      await live.release();
      const writer = await within(writing, TAKEOVER_SLACK_MS + 2_000, 'the writer');
      expect(performance.now() - releasedAt).toBeLessThan(TAKEOVER_SLACK_MS);

      frozen.kill('SIGCONT');
      const lost = await frozen.next((m) => m.type === 'lost' && m.id === 'f', 5_000);
      expect(['expired', 'not-owner']).toContain(lost.reason);
      await writer.release();
    } finally {
      const violations = await invariant.stop();
      expect(violations).toEqual([]);
    }
    expect(await suite.admin.exists(rw.key)).toBe(0);
  }, 60_000);

  it('a waiting writer killed: the readers it held back get in within the writer timeout', async () => {
    const locks = lockClient({ watchdogTimeoutMs: LEASE_MS });
    const rw = locks.readWriteLock('ledger');
    const prefix = rw.key.slice(0, -rw.name.length);
    const holding = await rw.readLock().acquire();
    const writer = res.worker(WORKER, {
      REDIS_URL: suite.url,
      KEY_PREFIX: prefix,
      WATCHDOG_MS: String(LEASE_MS),
    });
    await writer.next((m) => m.type === 'ready', STARTUP_MS);
    writer.send({ type: 'acquire', id: 'w', name: 'ledger', mode: 'write', waitMs: 60_000 });
    const writers = `latchkey_writers:{${rw.key}}`;
    await waitUntil('the writer waits', async () => (await suite.admin.zCard(writers)) === 1, 10_000);
    writer.kill('SIGKILL');
    const killedAt = performance.now();

    let gotAt: number | undefined;
    const reading = rw.readLock().acquire({ waitMs: 30_000 });
    void reading.then(
      () => (gotAt = performance.now()),
      () => undefined,
    );
    await sleep(1_000);
    expect(gotAt).toBeUndefined(); // held back while the writer's entry lives
    const reader = await within(reading, WRITER_TIMEOUT_MS + 3_000, 'the held-back reader');
    expect((gotAt ?? Infinity) - killedAt).toBeLessThan(WRITER_TIMEOUT_MS + 2_000);
    expect(await suite.admin.zCard(writers)).toBe(0);
    await reader.release();
    await holding.release();
    expect(await suite.admin.exists(rw.key)).toBe(0);
  }, 60_000);
});
