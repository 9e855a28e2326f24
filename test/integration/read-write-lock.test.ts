/**
 * The read-write lock: many readers or one writer, reentrant both ways, downgrade allowed,
 * upgrade refused at once, every waiter woken by one message, writer preference among latchkey
 * clients, and the watchdog renewing readers (their lease keys) and writers — against a real
 * Redis, with readers and writers in this process and in worker processes.
 */
import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockLostError,
  LockTimeoutError,
  LockUpgradeError,
  type LockClient,
} from '../../src/index.js';
import type { Worker, WorkerMessage } from '../support/child.js';
import { commandsFrom } from '../support/monitor.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

const WORKER = 'test/support/fixtures/read-write-worker.ts';

/** Names spelt out here rather than taken from src/keys.ts, so a renamed one fails the tests. */
const channelOf = (key: string): string => `redisson_rwlock:{${key}}`;
const writersOf = (key: string): string => `latchkey_writers:{${key}}`;

/** The lease keys of every reader of `key`: `{<key>}:<owner>:rwlock_timeout:<n>`. */
async function leaseKeys(admin: Redis, key: string): Promise<string[]> {
  return (await admin.keys(`{${key}}:*:rwlock_timeout:*`)).sort();
}

/** The hash without its owners: mode, and the reader and writer counts. */
async function shape(
  admin: Redis,
  key: string,
): Promise<{ mode?: string; readers: number[]; writers: number[] }> {
  const hash = await admin.hGetAll(key);
  const readers: number[] = [];
  const writers: number[] = [];
  for (const [field, value] of Object.entries(hash)) {
    if (field === 'mode') continue;
    (field.endsWith(':write') ? writers : readers).push(Number(value));
  }
  return { ...(hash.mode === undefined ? {} : { mode: hash.mode }), readers: readers.sort(), writers };
}

interface Interval {
  readonly mode: string;
  readonly from: bigint;
  readonly to: bigint;
}

/** Hold intervals from worker messages: from `held` (after the reply) to `releasing` (before the release). */
function intervalsOf(messages: readonly WorkerMessage[], until: bigint): Interval[] {
  const open = new Map<string, { mode: string; from: bigint }>();
  const done: Interval[] = [];
  for (const message of messages) {
    const id = String(message.id);
    if (message.type === 'held')
      open.set(id, { mode: String(message.mode), from: BigInt(String(message.t)) });
    if (message.type === 'releasing') {
      const start = open.get(id);
      if (start !== undefined) done.push({ ...start, to: BigInt(String(message.t)) });
      open.delete(id);
    }
  }
  for (const start of open.values()) done.push({ ...start, to: until });
  return done;
}

const overlaps = (a: Interval, b: Interval): boolean => a.from < b.to && b.from < a.to;

describe('ReadWriteLock', () => {
  const suite = sharedSuite('rw');
  const { res, lockClient } = suite;

  /** A worker process whose LockClient shares the key prefix of `locks`. */
  async function worker(locks: LockClient, watchdogMs = 5_000): Promise<Worker> {
    const probe = locks.readWriteLock('probe');
    const child = res.worker(WORKER, {
      REDIS_URL: suite.url,
      KEY_PREFIX: probe.key.slice(0, -probe.name.length),
      WATCHDOG_MS: String(watchdogMs),
    });
    await child.next((m) => m.type === 'ready', 20_000);
    return child;
  }

  it('lets many readers in at once, from this process and two others, in Redisson’s layout', async () => {
    const locks = lockClient({ watchdogTimeoutMs: 5_000 });
    const rw = locks.readWriteLock('catalog');
    const [a, b] = await Promise.all([worker(locks), worker(locks)]);
    const mine = await rw.readLock().acquire({ waitMs: 2_000 });
    a.send({ type: 'acquire', id: 'a', name: 'catalog', mode: 'read', waitMs: 2_000 });
    b.send({ type: 'acquire', id: 'b', name: 'catalog', mode: 'read', waitMs: 2_000 });
    expect((await a.next((m) => m.id === 'a')).type).toBe('held');
    expect((await b.next((m) => m.id === 'b')).type).toBe('held');

    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'read', readers: [1, 1, 1], writers: [] });
    const keys = await leaseKeys(suite.admin, rw.key);
    expect(keys).toHaveLength(3);
    for (const key of keys) {
      expect(key).toMatch(/:rwlock_timeout:1$/);
      expect(await suite.admin.pTTL(key)).toBeGreaterThan(3_000);
    }
    expect(await suite.admin.pTTL(rw.key)).toBeGreaterThan(3_000);
    expect(await rw.readLock().isLocked()).toBe(true);

    await mine.release();
    a.send({ type: 'release', id: 'a' });
    await a.next((m) => m.type === 'released');
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'read', readers: [1], writers: [] });
    b.send({ type: 'release', id: 'b' });
    await b.next((m) => m.type === 'released');
    expect(await suite.admin.exists(rw.key)).toBe(0);
    expect(await leaseKeys(suite.admin, rw.key)).toEqual([]);
  });

  it('gives the writer the lock alone: no reader and no other writer, here or in another process', async () => {
    const locks = lockClient();
    const rw = locks.readWriteLock('ledger');
    const other = await worker(locks);
    const writer = await rw.writeLock().acquire();
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'write', readers: [], writers: [1] });

    expect(await rw.readLock().tryAcquire()).toBeNull();
    expect(await rw.writeLock().tryAcquire({ waitMs: 200 })).toBeNull();
    other.send({ type: 'acquire', id: 'r', name: 'ledger', mode: 'read', waitMs: 300 });
    expect(await other.next((m) => m.id === 'r')).toMatchObject({
      type: 'failed',
      error: 'LockTimeoutError',
    });
    other.send({ type: 'acquire', id: 'w', name: 'ledger', mode: 'write', waitMs: 300 });
    expect(await other.next((m) => m.id === 'w')).toMatchObject({
      type: 'failed',
      error: 'LockTimeoutError',
    });
    await expect(rw.readLock().acquire({ waitMs: 100 })).rejects.toBeInstanceOf(LockTimeoutError);

    await writer.release();
    expect(await suite.admin.exists(rw.key)).toBe(0);
    // A reader excludes writers too.
    const reader = await rw.readLock().acquire();
    expect(await rw.writeLock().tryAcquire({ waitMs: 200 })).toBeNull();
    other.send({ type: 'acquire', id: 'w2', name: 'ledger', mode: 'write', waitMs: 300 });
    expect(await other.next((m) => m.id === 'w2')).toMatchObject({
      type: 'failed',
      error: 'LockTimeoutError',
    });
    await reader.release();
    // The writer that gave up left no waiting-writer entry behind.
    expect(await suite.admin.exists(writersOf(rw.key))).toBe(0);
  });

  it('is reentrant both ways: one lease key per read hold, and a write re-entry does not grow the TTL', async () => {
    const locks = lockClient({ watchdogTimeoutMs: 3_000 });
    const rw = locks.readWriteLock('profile');
    await rw.readLock().withLock(async () => {
      await rw.readLock().withLock(async () => {
        expect(await rw.readLock().holdCount()).toBe(2);
        const keys = await leaseKeys(suite.admin, rw.key);
        expect(keys.map((key) => key.slice(-17))).toEqual(
          ['rwlock_timeout:1', 'rwlock_timeout:2'].map((s) => `:${s}`),
        );
      });
      expect(await rw.readLock().holdCount()).toBe(1);
      expect(await leaseKeys(suite.admin, rw.key)).toHaveLength(1);
    });
    expect(await suite.admin.exists(rw.key)).toBe(0);

    await rw.writeLock().withLock(async () => {
      for (let depth = 2; depth <= 4; depth += 1) {
        await rw.writeLock().acquire();
        expect(await rw.writeLock().holdCount()).toBe(depth);
        expect(await suite.admin.pTTL(rw.key)).toBeLessThanOrEqual(3_000);
      }
      expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'write', readers: [], writers: [4] });
    });
    // withLock released one hold; the three nested ones are still the owner's. The hold counts
    // belong to the withLock context, which is over: a fresh context holds nothing.
    expect(await rw.writeLock().holdCount()).toBe(0);
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'write', readers: [], writers: [3] });
    expect(await rw.forceUnlock()).toBe(true);
  });

  it('downgrades: the writer takes the read lock, releases the write lock, and still reads beside new readers', async () => {
    const locks = lockClient();
    const rw = locks.readWriteLock('prices');
    const other = await worker(locks);
    await rw.writeLock().withLock(async (writeLease) => {
      const read = await rw.readLock().acquire({ waitMs: 0 });
      expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'write', readers: [1], writers: [1] });
      expect(await rw.readLock().tryAcquire()).not.toBeNull(); // re-entry of the downgrader's read
      other.send({ type: 'acquire', id: 'early', name: 'prices', mode: 'read', waitMs: 0 });
      expect((await other.next((m) => m.id === 'early')).type).toBe('failed');

      await writeLease.release();
      expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'read', readers: [2], writers: [] });
      other.send({ type: 'acquire', id: 'late', name: 'prices', mode: 'read', waitMs: 2_000 });
      expect((await other.next((m) => m.id === 'late')).type).toBe('held');
      other.send({ type: 'acquire', id: 'writer', name: 'prices', mode: 'write', waitMs: 200 });
      expect((await other.next((m) => m.id === 'writer')).type).toBe('failed');
      expect(read.signal.aborted).toBe(false);
    });
    other.send({ type: 'release', id: 'late' });
    await other.next((m) => m.type === 'released');
    // The downgrader still holds its two read holds (`read` and the nested tryAcquire's).
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'read', readers: [2], writers: [] });
    await rw.forceUnlock();
  });

  it('rejects an upgrade at once with LockUpgradeError, changing nothing in Redis', async () => {
    const locks = lockClient();
    const rw = locks.readWriteLock('inventory');
    await rw.readLock().withLock(async () => {
      const before = { hash: await suite.admin.hGetAll(rw.key), keys: await leaseKeys(suite.admin, rw.key) };
      const startedAt = performance.now();
      const outcome = await settle(rw.writeLock().acquire());
      expect(outcome.error).toBeInstanceOf(LockUpgradeError);
      expect((outcome.error as LockUpgradeError).code).toBe('UPGRADE_REJECTED');
      expect(outcome.at - startedAt).toBeLessThan(1_000);
      await expect(rw.writeLock().tryAcquire({ waitMs: 10_000 })).rejects.toBeInstanceOf(LockUpgradeError);
      expect({ hash: await suite.admin.hGetAll(rw.key), keys: await leaseKeys(suite.admin, rw.key) }).toEqual(
        before,
      );
      expect(await suite.admin.exists(writersOf(rw.key))).toBe(0);
    });
    expect(await suite.admin.exists(rw.key)).toBe(0);
  });

  it('wakes every blocked reader, here and in two other processes, with the one message of a writer’s release', async () => {
    const locks = lockClient();
    const rw = locks.readWriteLock('dashboard');
    const [a, b] = await Promise.all([worker(locks), worker(locks)]);
    const messages: string[] = [];
    const subscriber = await res.connect();
    await subscriber.subscribe(channelOf(rw.key), (message) => messages.push(message));

    const writer = await rw.writeLock().acquire();
    const local = [1, 2, 3].map(() => rw.readLock().acquire({ waitMs: 10_000 }));
    a.send({ type: 'acquire', id: 'a', name: 'dashboard', mode: 'read', waitMs: 10_000 });
    b.send({ type: 'acquire', id: 'b', name: 'dashboard', mode: 'read', waitMs: 10_000 });
    // Every reader has tried and subscribed: the channel has this test's listener and three clients'.
    await waitUntil('the waiters subscribed', async () => (await res.numsub(channelOf(rw.key))) >= 4);
    await sleep(200);
    expect(a.messages.some((m) => m.id === 'a')).toBe(false);

    const releasedAt = performance.now();
    await writer.release();
    const leases = await within(Promise.all(local), 2_000, 'the local readers');
    await within(
      a.next((m) => m.id === 'a' && m.type === 'held'),
      2_000,
      'worker a',
    );
    await within(
      b.next((m) => m.id === 'b' && m.type === 'held'),
      2_000,
      'worker b',
    );
    expect(performance.now() - releasedAt).toBeLessThan(2_000);
    expect(messages).toEqual(['1']);
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'read', readers: [1, 1, 1, 1, 1], writers: [] });
    await Promise.all(leases.map((lease) => lease.release()));
    a.send({ type: 'release', id: 'a' });
    b.send({ type: 'release', id: 'b' });
    await a.next((m) => m.type === 'released');
    await b.next((m) => m.type === 'released');
    await waitUntil('the last reader published 0', () => messages.length === 2);
    expect(messages).toEqual(['1', '0']);
  });

  it('prefers a waiting writer: readers overlapping without a gap from two processes still let it in within two read holds', async () => {
    const locks = lockClient();
    const rw = locks.readWriteLock('report');
    const [a, b] = await Promise.all([worker(locks), worker(locks)]);
    const holdMs = 500;
    a.send({ type: 'readLoop', name: 'report', everyMs: 150, holdMs });
    b.send({ type: 'readLoop', name: 'report', everyMs: 150, holdMs });
    await a.next((m) => m.type === 'held');
    await b.next((m) => m.type === 'held');
    await sleep(600); // readers now overlap continuously

    const askedAt = performance.now();
    const writer = await rw.writeLock().acquire({ waitMs: 8_000 });
    const waitedMs = performance.now() - askedAt;
    const heldFrom = process.hrtime.bigint();
    // The stated bound: the readers inside when it asked leave within one hold; two, with slack.
    expect(waitedMs).toBeLessThan(2 * holdMs + 1_500);
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'write', readers: [], writers: [1] });
    await sleep(300);
    const heldTo = process.hrtime.bigint();
    await writer.release();
    await sleep(400); // the blocked readers get in again
    a.send({ type: 'stopLoop' });
    b.send({ type: 'stopLoop' });
    await a.next((m) => m.type === 'loopDone', 10_000);
    await b.next((m) => m.type === 'loopDone', 10_000);

    const write: Interval = { mode: 'write', from: heldFrom, to: heldTo };
    const reads = [...intervalsOf(a.messages, heldTo), ...intervalsOf(b.messages, heldTo)];
    expect(reads.length).toBeGreaterThan(6);
    expect(reads.filter((read) => overlaps(read, write))).toEqual([]);
    // Readers came back after the writer.
    expect(reads.some((read) => read.from > heldTo)).toBe(true);
    expect(await suite.admin.exists(writersOf(rw.key))).toBe(0);
  });

  it('a waiting writer that gives up (timeout or abort) leaves no entry behind, and the readers it held back come in', async () => {
    const locks = lockClient();
    const rw = locks.readWriteLock('stock');
    const other = await worker(locks);
    other.send({ type: 'acquire', id: 'r', name: 'stock', mode: 'read' });
    await other.next((m) => m.id === 'r');

    // Timeout: while it waits, new readers wait; when it gives up, they come in.
    const timedOut = settle(rw.writeLock().acquire({ waitMs: 600 }));
    await waitUntil('the writer is waiting', async () => (await suite.admin.zCard(writersOf(rw.key))) === 1);
    expect(await suite.admin.pTTL(writersOf(rw.key))).toBeGreaterThan(0);
    const heldBack = rw.readLock().acquire({ waitMs: 5_000 });
    await sleep(150);
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'read', readers: [1], writers: [] });
    expect((await timedOut).error).toBeInstanceOf(LockTimeoutError);
    const reader = await within(heldBack, 1_500, 'the held-back reader');
    expect(await suite.admin.exists(writersOf(rw.key))).toBe(0);
    await reader.release();

    // Abort.
    const controller = new AbortController();
    const aborted = settle(rw.writeLock().acquire({ signal: controller.signal }));
    await waitUntil('the writer is waiting', async () => (await suite.admin.zCard(writersOf(rw.key))) === 1);
    other.send({ type: 'acquire', id: 'new', name: 'stock', mode: 'read', waitMs: 5_000 });
    await sleep(200);
    expect(other.messages.some((m) => m.id === 'new')).toBe(false);
    const abortedAt = performance.now();
    controller.abort(new Error('shutting down'));
    expect((await aborted).error).toMatchObject({ message: 'shutting down' });
    expect((await other.next((m) => m.id === 'new')).type).toBe('held');
    expect(performance.now() - abortedAt).toBeLessThan(1_500);
    expect(await suite.admin.exists(writersOf(rw.key))).toBe(0);
  });

  it('rejects bad input before sending any command', async () => {
    const locks = lockClient();
    const monitor = await res.monitor();
    expect(() => locks.readWriteLock('')).toThrow(InvalidArgumentError);
    const rw = locks.readWriteLock('orders');
    await expect(rw.readLock().acquire({ waitMs: -1 })).rejects.toThrow(
      /^Expected `waitMs` to be .*, got `-1` \(number\)$/,
    );
    await expect(rw.writeLock().tryAcquire({ leaseMs: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    // @ts-expect-error -- a caller without types
    await expect(rw.writeLock().withLock('not a function')).rejects.toBeInstanceOf(InvalidArgumentError);
    await sleep(100);
    await monitor.stop();
    expect(commandsFrom(monitor.lines).filter((args) => args.some((arg) => arg.includes('orders')))).toEqual(
      [],
    );
  });

  it('shows no owner field in errors or events', async () => {
    const locks = lockClient({ watchdogTimeoutMs: 600 });
    const seen: unknown[] = [];
    for (const event of ['acquired', 'released', 'lockLost', 'renewFailed', 'error'] as const) {
      locks.on(event, (payload: unknown) => seen.push(payload));
    }
    const rw = locks.readWriteLock('payroll');
    const errors: unknown[] = [];
    let fields: string[] = [];
    await rw
      .readLock()
      .withLock(async (lease) => {
        fields = Object.keys(await suite.admin.hGetAll(rw.key)).filter((field) => field !== 'mode');
        errors.push((await settle(rw.writeLock().acquire())).error);
        await suite.admin.del(await leaseKeys(suite.admin, rw.key));
        await waitUntil('the reader lost its lock', () => lease.signal.aborted, 3_000);
        errors.push(lease.signal.reason);
      })
      .catch((error: unknown) => errors.push(error));
    const other = locks.readWriteLock('payroll-2');
    const w = await other.writeLock().acquire();
    errors.push(
      (await settle(lockClient().readWriteLock('payroll-2').readLock().acquire({ waitMs: 100 }))).error,
    );
    await w.release();

    expect(fields).toHaveLength(1);
    const owner = fields[0] ?? 'missing';
    const clientId = owner.split(':')[0] ?? 'missing';
    const text = JSON.stringify([...seen, ...errors], (_key, value: unknown) =>
      value instanceof Error
        ? { name: value.name, message: value.message, stack: value.stack, cause: String(value.cause) }
        : value,
    );
    expect(errors.length).toBeGreaterThanOrEqual(3);
    expect(text).not.toContain(clientId);
    expect(text).toContain('LockUpgradeError');
  });

  it('renews readers (hash and lease keys) and writers with the watchdog, and reports loss on the lease signal', async () => {
    const locks = lockClient({ watchdogTimeoutMs: 600 });
    const lost: string[] = [];
    locks.on('lockLost', (event) => lost.push(`${event.name}:${event.error.reason}`));
    const reads = locks.readWriteLock('menu');
    const writes = locks.readWriteLock('menu-draft');
    const reader = await reads.readLock().acquire();
    const writer = await writes.writeLock().acquire();
    await sleep(1_800); // three leases
    expect(reader.signal.aborted || writer.signal.aborted).toBe(false);
    expect(await leaseKeys(suite.admin, reads.key)).toHaveLength(1);
    expect(await suite.admin.pTTL((await leaseKeys(suite.admin, reads.key))[0] ?? '')).toBeGreaterThan(0);
    expect(await suite.admin.exists(writes.key)).toBe(1);

    // forceUnlock: told at once.
    expect(await writes.forceUnlock()).toBe(true);
    expect(writer.signal.reason).toBeInstanceOf(LockLostError);
    expect((writer.signal.reason as LockLostError).reason).toBe('force-unlocked');

    // The hash deleted behind the reader's back: told at the next renewal.
    await suite.admin.del(reads.key);
    await waitUntil('the reader learned', () => reader.signal.aborted, 2_000);
    expect((reader.signal.reason as LockLostError).reason).toBe('not-owner');
    expect(lost.sort()).toEqual(['menu-draft:force-unlocked', 'menu:not-owner']);

    // A writer whose key is deleted behind its back learns at the next renewal too.
    const again = await writes.writeLock().acquire();
    await suite.admin.del(writes.key);
    await waitUntil('the writer learned', () => again.signal.aborted, 2_000);
    expect((again.signal.reason as LockLostError).reason).toBe('not-owner');
  });

  it('tells a reader whose lease keys lapsed that it lost the lock, even while another reader keeps the hash alive', async () => {
    const locks = lockClient({ watchdogTimeoutMs: 600 });
    const rw = locks.readWriteLock('search-index');
    const victim = await rw.readLock().acquire();
    const [victimKey] = await leaseKeys(suite.admin, rw.key);
    const keeper = await rw.readLock().acquire(); // another owner keeps the hash alive
    expect(await leaseKeys(suite.admin, rw.key)).toHaveLength(2);

    // What a reader stalled past its lease finds: its lease key gone, its field still there.
    await suite.admin.del(victimKey ?? '');
    await waitUntil('the victim learned', () => victim.signal.aborted, 2_000);
    expect((victim.signal.reason as LockLostError).reason).toBe('not-owner');
    // Its field is gone; the other reader's is intact and keeps being renewed.
    expect(await shape(suite.admin, rw.key)).toEqual({ mode: 'read', readers: [1], writers: [] });
    await sleep(900);
    expect(keeper.signal.aborted).toBe(false);
    expect(await leaseKeys(suite.admin, rw.key)).toHaveLength(1);
    await expect(victim.release()).rejects.toThrow(/cannot be released: .* was lost/);
    await keeper.release();
    expect(await suite.admin.exists(rw.key)).toBe(0);
  });
});
