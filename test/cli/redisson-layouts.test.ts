/**
 * The CLI on keys a Java service on Redisson left: each layout written as Redisson's scripts
 * leave it (RLock, RFencedLock, RFairLock with a queued waiter, RReadWriteLock in read and in
 * write mode, RPermitExpirableSemaphore with permits with and without a lease, RSemaphore,
 * RCountDownLatch), then inspected. Key names are spelt out, as Redisson builds them for a name
 * without a hash tag.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { assertNoSecrets, describeRun, jsonOf, runCli } from '../support/cli.js';
import { sharedSuite } from '../support/shared-suite.js';
import { prefixOf } from './fixtures.js';

interface Json {
  kind: string;
  held: boolean;
  holders: { holdCount: number; role: string; leaseMs: number | null }[];
  ttlMs: number | null;
  fencingToken: string | null;
  mode: string | null;
  permits: { free: number | null; out: number; lapsed: number } | null;
  count: number | null;
  waiting: number;
  waiters: { position: number; deadlineMs: number | null; listening: boolean | null }[];
}

/** Redisson's score for a permit taken without a lease. */
const NON_EXPIRABLE = 922337203685477;
/** RFairLock's default threadWaitTime: a queued waiter's deadline is the lock's PTTL plus this. */
const THREAD_WAIT_MS = 300_000;

// Several CLI runs per test: node and tsx start slowly on a loaded two-core machine, so the
// leases here are minutes long, to outlive them.
describe('latchkey inspect on Redisson’s layouts', { timeout: 240_000 }, () => {
  const suite = sharedSuite('cli-redisson');

  /** `<uuid>:<threadId>`, as Redisson names an owner. */
  function owner(): string {
    return `${randomUUID()}:${1 + Math.floor(Math.random() * 100)}`;
  }

  async function inspect(prefix: string, name: string, ...extra: string[]) {
    const run = await runCli(['inspect', name, '--prefix', prefix, '--url', suite.url, '--json', ...extra]);
    expect(run.code, describeRun(run)).toBe(0);
    return { run, parsed: jsonOf<Json>(run) };
  }

  it('shows RLock, RFencedLock and RFairLock with a queued waiter and its deadline', async () => {
    const prefix = prefixOf(suite.lockClient().lock('x'));
    const [holder, fencedHolder, fairHolder, fairWaiter] = [owner(), owner(), owner(), owner()];
    const lock = `${prefix}orders`;
    await suite.admin.hSet(lock, holder, '2');
    await suite.admin.pExpire(lock, 600_000);
    const fenced = `${prefix}ledger`;
    await suite.admin.hSet(fenced, fencedHolder, '1');
    await suite.admin.pExpire(fenced, 600_000);
    await suite.admin.set(`redisson_lock_token:{${fenced}}`, '41');
    const fair = `${prefix}settlement`;
    await suite.admin.hSet(fair, fairHolder, '1');
    await suite.admin.pExpire(fair, 600_000);
    // A waiter queued by RFairLock's tryLock: deadline = now + the lock's PTTL + threadWaitTime.
    const [seconds] = await suite.admin.time();
    await suite.admin.rPush(`redisson_lock_queue:{${fair}}`, fairWaiter);
    await suite.admin.zAdd(`redisson_lock_timeout:{${fair}}`, {
      score: Number(seconds) * 1_000 + 600_000 + THREAD_WAIT_MS,
      value: fairWaiter,
    });
    const secrets = [holder, fencedHolder, fairHolder, fairWaiter].flatMap((field) => [
      field,
      field.split(':')[0] ?? '',
    ]);

    // One at a time: each is a node process, and the machine may have two cores.
    const plain = await inspect(prefix, 'orders');
    const withToken = await inspect(prefix, 'ledger');
    const queued = await inspect(prefix, 'settlement');

    expect(plain.parsed).toMatchObject({ kind: 'lock', holders: [{ holdCount: 2, role: 'owner' }] });
    expect(withToken.parsed).toMatchObject({
      kind: 'fenced-lock',
      fencingToken: '41',
      holders: [{ holdCount: 1 }],
    });
    expect(queued.parsed).toMatchObject({
      kind: 'fair-lock',
      holders: [{ holdCount: 1 }],
      waiting: 1,
      // Nobody listens on the Java waiter's channel here.
      waiters: [{ position: 1, listening: false }],
    });
    const deadline = queued.parsed.waiters[0]?.deadlineMs ?? 0;
    expect(deadline).toBeGreaterThan(THREAD_WAIT_MS);
    expect(deadline).toBeLessThanOrEqual(THREAD_WAIT_MS + 600_000);
    for (const { run } of [plain, withToken, queued]) assertNoSecrets(run, secrets);
  });

  it('shows RReadWriteLock in read mode with each reader’s lease, and in write mode', async () => {
    const prefix = prefixOf(suite.lockClient().lock('x'));
    const [first, second, writer] = [owner(), owner(), owner()];
    const key = `${prefix}catalog`;
    // Two readers, the second holding twice: one lease key per hold, the hash as long as the longest.
    await suite.admin.hSet(key, { mode: 'read', [first]: '1', [second]: '2' });
    await suite.admin.set(`{${key}}:${first}:rwlock_timeout:1`, '1', { PX: 500_000 });
    await suite.admin.set(`{${key}}:${second}:rwlock_timeout:1`, '1', { PX: 200_000 });
    await suite.admin.set(`{${key}}:${second}:rwlock_timeout:2`, '1', { PX: 400_000 });
    await suite.admin.pExpire(key, 500_000);
    const written = `${prefix}prices`;
    await suite.admin.hSet(written, { mode: 'write', [`${writer}:write`]: '1' });
    await suite.admin.pExpire(written, 600_000);

    const read = await inspect(prefix, 'catalog');
    const write = await inspect(prefix, 'prices');

    expect(read.parsed).toMatchObject({ kind: 'read-write-lock', mode: 'read', held: true });
    const readers = [...read.parsed.holders].sort((a, b) => a.holdCount - b.holdCount);
    expect(readers.map((holder) => [holder.role, holder.holdCount])).toEqual([
      ['reader', 1],
      ['reader', 2],
    ]);
    // A reader's lease is its longest hold's.
    expect(readers[0]?.leaseMs).toBeGreaterThan(400_000);
    expect(readers[1]?.leaseMs).toBeGreaterThan(200_000);
    expect(readers[1]?.leaseMs).toBeLessThanOrEqual(400_000);
    expect(write.parsed).toMatchObject({
      kind: 'read-write-lock',
      mode: 'write',
      holders: [{ role: 'writer', holdCount: 1 }],
    });
    assertNoSecrets(read.run, [first, second, first.split(':')[0] ?? '', second.split(':')[0] ?? '']);
    assertNoSecrets(write.run, [writer, writer.split(':')[0] ?? '']);
  });

  it('shows RPermitExpirableSemaphore’s permits, RSemaphore and RCountDownLatch counters', async () => {
    const prefix = prefixOf(suite.lockClient().lock('x'));
    const key = `${prefix}pickers`;
    const [timed, forever, lapsed] = [randomBytes(16), randomBytes(16), randomBytes(16)];
    const [seconds] = await suite.admin.time();
    const now = Number(seconds) * 1_000;
    await suite.admin.set(key, '1');
    // Permit ids as Redisson stores them: 16 raw bytes; a permit without a lease never ends.
    await suite.admin.sendCommand([
      'ZADD',
      `{${key}}:timeout`,
      String(now + 400_000),
      timed,
      String(NON_EXPIRABLE),
      forever,
      String(now - 5_000),
      lapsed,
    ]);
    await suite.admin.set(`${prefix}exports`, '3');
    await suite.admin.set(`${prefix}warmup`, '2');

    const permits = await inspect(prefix, 'pickers');
    const counter = await inspect(prefix, 'exports');
    const semaphore = await inspect(prefix, 'exports', '--kind', 'semaphore');
    const latch = await inspect(prefix, 'warmup', '--kind', 'count-down-latch');

    expect(permits.parsed).toMatchObject({
      kind: 'permit-semaphore',
      held: true,
      permits: { free: 1, out: 2, lapsed: 1 },
    });
    const leases = permits.parsed.holders.map((holder) => holder.leaseMs);
    expect(leases).toHaveLength(2);
    expect(leases[0]).toBeGreaterThan(0);
    expect(leases[0]).toBeLessThanOrEqual(400_000);
    expect(leases[1]).toBeNull();
    assertNoSecrets(
      permits.run,
      [timed, forever, lapsed].map((id) => id.toString('hex')),
    );
    expect(counter.parsed).toMatchObject({ kind: 'counter', count: 3 });
    expect(semaphore.parsed).toMatchObject({ kind: 'semaphore', permits: { free: 3 } });
    expect(latch.parsed).toMatchObject({ kind: 'count-down-latch', count: 2 });
  });
});
