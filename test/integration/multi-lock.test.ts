/**
 * MultiLock against a real Redis: all or nothing (timeout, abort, a closed client), no deadlock
 * between callers that list the same locks in opposite orders (in one process and across
 * processes), exclusion, a member's loss aborting the multi-lease's signal with that member's
 * LockLostError, members of every lock kind keeping their own behaviour, `await using`, a member
 * held through Redisson's own lock script, bad input refused before any command, and free
 * members taken in one round trip (measured through a proxy that delays every packet).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ClientClosedError,
  FencedLease,
  InvalidArgumentError,
  LockClient,
  LockLostError,
  LockReentryError,
  LockTimeoutError,
  type MemberHandle,
} from '../../src/index.js';
import { findOverlaps, describeOverlaps, overlaps, type Interval } from '../chaos/intervals.js';
import { commandsOf, connectClient, destroyClient } from '../support/clients.js';
import { commandsDuring } from '../support/commands-during.js';
import { startFaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { redissonChannel, redissonTryLock, redissonUnlock } from '../support/redisson.js';
import { clientAddr } from '../support/monitor.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { stamp } from '../support/stamps.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

const WORKER = new URL('../support/fixtures/multi-lock-worker.ts', import.meta.url).pathname;
// Child processes start through tsx, which takes a while on a busy machine.
const STARTUP_MS = 60_000;

describe('MultiLock', () => {
  let url: string;
  let admin: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    admin = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  async function held(keys: readonly string[]): Promise<number> {
    return keys.length === 0 ? 0 : admin.exists([...keys]);
  }

  it('takes every member, hands out their leases in the order given, and releases them all', async () => {
    const locks = await res.lockClient({ keyPrefix: uniquePrefix('multi-take') });
    const handles = [locks.lock('order:9'), locks.fencedLock('ledger:9'), locks.lock('invoice:9')] as const;
    const multi = locks.multiLock(handles);
    expect(multi.names).toEqual(['order:9', 'ledger:9', 'invoice:9']);

    const lease = await multi.acquire({ waitMs: 5_000 });
    expect(lease.leases.map((member) => member.key)).toEqual(handles.map((handle) => handle.key));
    // A fenced member's lease keeps its token, typed as such.
    expect(lease.leases[1]).toBeInstanceOf(FencedLease);
    expect(lease.leases[1].token).toBeGreaterThan(0n);
    expect(await held(handles.map((handle) => handle.key))).toBe(3);
    expect(lease.signal.aborted).toBe(false);
    expect(JSON.stringify(lease)).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);

    await lease.release();
    expect(lease.released).toBe(true);
    expect(await held(handles.map((handle) => handle.key))).toBe(0);
    await expect(lease.release()).rejects.toMatchObject({ code: 'NOT_OWNER' });
  });

  it('gives each member the leaseMs asked for, without renewal', async () => {
    const locks = await res.lockClient({
      keyPrefix: uniquePrefix('multi-lease-ms'),
      watchdogTimeoutMs: 30_000,
    });
    const handles = [locks.lock('pick:1'), locks.fairLock('pick:2'), locks.simpleLock('pick:3')];
    const lease = await locks.multiLock(handles).acquire({ leaseMs: 10_000 });
    for (const handle of handles) {
      const pttl = await admin.pTTL(handle.key);
      expect(pttl).toBeGreaterThan(5_000);
      expect(pttl).toBeLessThanOrEqual(10_000);
    }
    await lease.release();
    expect(await held(handles.map((handle) => handle.key))).toBe(0);
  });

  it('is released by `await using` at the end of its block', async () => {
    const locks = await res.lockClient({ keyPrefix: uniquePrefix('multi-using') });
    const keys = [locks.lock('cart:1').key, locks.lock('cart:2').key];
    {
      await using lease = await locks.multiLock([locks.lock('cart:1'), locks.lock('cart:2')]).acquire();
      expect(lease.leases).toHaveLength(2);
      expect(await held(keys)).toBe(2);
    }
    expect(await held(keys)).toBe(0);
  });

  it('gives back what it took when waitMs runs out, before it rejects or resolves null', async () => {
    const keyPrefix = uniquePrefix('multi-timeout');
    const locks = await res.lockClient({ keyPrefix });
    const other = await res.lockClient({ keyPrefix });
    const blocker = await other.lock('stock:b').acquire();
    const multi = locks.multiLock([locks.lock('stock:c'), locks.lock('stock:b'), locks.lock('stock:a')]);
    const free = [locks.lock('stock:a').key, locks.lock('stock:c').key];

    const startedAt = performance.now();
    const error = await multi.acquire({ waitMs: 300 }).catch((e: unknown) => e);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(290);
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect((error as Error).message).toMatch(/lock "stock:b" stayed held/);
    expect(await held(free)).toBe(0);

    expect(await multi.tryAcquire()).toBeNull();
    expect(await held(free)).toBe(0);
    expect(await multi.tryAcquire({ waitMs: 200 })).toBeNull();
    expect(await held(free)).toBe(0);

    await blocker.release();
    const lease = await multi.tryAcquire();
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  it('gives back what it took when aborted while waiting, within the abort clean-up bound', async () => {
    const keyPrefix = uniquePrefix('multi-abort');
    const locks = await res.lockClient({ keyPrefix });
    const other = await res.lockClient({ keyPrefix });
    const blocker = await other.lock('route:2').acquire();
    const multi = locks.multiLock([locks.lock('route:3'), locks.lock('route:2'), locks.lock('route:1')]);
    const taken = locks.lock('route:1').key;

    const controller = new AbortController();
    const acquiring = settle(multi.acquire({ signal: controller.signal }));
    // It holds route:1 (before route:2 by key) while it waits for route:2.
    await waitUntil('route:1 is held by the waiting multi-lock', async () => (await held([taken])) === 1);
    const reason = new Error('shutting down');
    controller.abort(reason);
    const abortedAt = performance.now();
    const outcome = await acquiring;
    expect(outcome.error).toBe(reason);
    // A single lock's acquire waits at most its short grace for its clean-up; with this one's own
    // release on top, two such graces plus a loaded machine's lateness: far inside the 30 s lease.
    expect(outcome.at - abortedAt).toBeLessThan(2_000);
    await waitUntil('route:1 is released', async () => (await held([taken])) === 0, 2_000);
    expect(await held([locks.lock('route:3').key])).toBe(0);
    expect(await other.lock('route:2').isLocked()).toBe(true);
    await blocker.release();
  });

  it('rejects with ClientClosedError and holds nothing when its client closes while it waits', async () => {
    const keyPrefix = uniquePrefix('multi-close');
    const locks = await res.lockClient({ keyPrefix });
    const other = await res.lockClient({ keyPrefix });
    const blocker = await other.lock('batch:b').acquire();
    const acquiring = settle(locks.multiLock([locks.lock('batch:a'), locks.lock('batch:b')]).acquire());
    await waitUntil('batch:a is held', async () => (await held([locks.lock('batch:a').key])) === 1);
    await locks.close();
    expect((await acquiring).error).toBeInstanceOf(ClientClosedError);
    expect(await held([other.lock('batch:a').key])).toBe(0);
    await blocker.release();
  });

  it('waits for a held member with its own acquire, woken by its release', async () => {
    const keyPrefix = uniquePrefix('multi-wake');
    const locks = await res.lockClient({ keyPrefix });
    const other = await res.lockClient({ keyPrefix });
    const blocker = await other.lock('parcel:b').acquire();
    let resolvedAt = 0;
    const acquiring = locks
      .multiLock([locks.lock('parcel:a'), locks.lock('parcel:b'), locks.lock('parcel:c')])
      .acquire({ waitMs: 20_000 })
      .then((lease) => {
        resolvedAt = performance.now();
        return lease;
      });
    await waitUntil(
      'the waiter subscribed',
      async () => (await res.numsub(`redisson_lock__channel:{${blocker.key}}`)) >= 1,
    );
    await sleep(300);
    expect(resolvedAt).toBe(0);
    const releasedAt = performance.now();
    await blocker.release();
    const lease = await acquiring;
    // Woken by the release's message, not by the holder's 30 s lease running out.
    expect(resolvedAt - releasedAt).toBeLessThan(5_000);
    await lease.release();
  });

  it('never deadlocks two clients taking the same locks in opposite orders, and they exclude each other', async () => {
    const keyPrefix = uniquePrefix('multi-order');
    const one = await res.lockClient({ keyPrefix });
    const two = await res.lockClient({ keyPrefix });
    const names = ['account:1', 'account:2', 'account:3'];
    const sections: Interval[] = [];
    async function run(locks: LockClient, order: readonly string[], who: string): Promise<void> {
      const multi = locks.multiLock(order.map((name) => locks.lock(name)));
      for (let i = 0; i < 15; i += 1) {
        await multi.withLock(async () => {
          const start = process.hrtime.bigint();
          await sleep(2);
          sections.push({ start, end: process.hrtime.bigint(), who: `${who} #${i}` });
        });
      }
    }
    await within(
      Promise.all([run(one, names, 'one'), run(two, [...names].reverse(), 'two')]),
      25_000,
      'two multi-locks in opposite orders',
    );
    expect(sections).toHaveLength(30);
    expect(findOverlaps(sections), describeOverlaps(overlaps(sections, 5).pairs)).toBe(0);
  });

  it(
    'excludes across processes that list the locks in different orders, and none deadlocks',
    async () => {
      const keyPrefix = uniquePrefix('multi-procs');
      const env = { REDIS_URL: url, KEY_PREFIX: keyPrefix, WATCHDOG_MS: '30000' };
      const orders = [
        'ledger:a,ledger:b,rw:ledger:c',
        'rw:ledger:c,ledger:b,ledger:a',
        'ledger:b,rw:ledger:c,ledger:a',
      ];
      const workers = orders.map((names) => res.worker(WORKER, { ...env, NAMES: names }));
      await Promise.all(workers.map((worker) => worker.next((msg) => msg['type'] === 'ready', STARTUP_MS)));
      for (const worker of workers) worker.send({ type: 'rounds', count: 10, holdMs: 3 });
      await Promise.all(workers.map((worker) => worker.next((msg) => msg['type'] === 'rounds-done', 60_000)));
      const sections: Interval[] = workers.flatMap((worker, w) =>
        worker.messages
          .filter((msg) => msg['type'] === 'section')
          .map((msg, i) => ({
            start: stamp(msg, 'start'),
            end: stamp(msg, 'end'),
            who: `worker ${w} #${i}`,
          })),
      );
      expect(sections).toHaveLength(30);
      expect(findOverlaps(sections), describeOverlaps(overlaps(sections, 5).pairs)).toBe(0);
      const keys = ['ledger:a', 'ledger:b', 'ledger:c'].map((name) => `${keyPrefix}${name}`);
      expect(await held(keys)).toBe(0);
    },
    2 * STARTUP_MS + 60_000,
  );

  it("aborts the multi-lease's signal with the lost member's LockLostError", async () => {
    const locks = await res.lockClient({ keyPrefix: uniquePrefix('multi-loss'), watchdogTimeoutMs: 300 });
    const handles = [locks.lock('payment:1'), locks.lock('payment:2')];
    const lease = await locks.multiLock(handles).acquire();
    const member = lease.leases[1];
    if (member === undefined) throw new Error('no second member');
    // Deleted behind its back: the watchdog's next renewal finds it gone.
    await admin.del(member.key);
    await waitUntil('the multi-lease signal aborted', () => lease.signal.aborted, 5_000);
    expect(lease.signal.reason).toBeInstanceOf(LockLostError);
    expect(lease.signal.reason).toBe(member.signal.reason);
    expect((lease.signal.reason as LockLostError).reason).toBe('not-owner');
    expect(lease.leases[0]?.signal.aborted).toBe(false);
    expect(lease.toJSON().lost).toBe(true);
    // Its release gives back the member still held and reports the lost one.
    await expect(lease.release()).rejects.toMatchObject({ code: 'NOT_OWNER' });
    expect(await held(handles.map((handle) => handle.key))).toBe(0);
  });

  it('reports the loss on the first read of its signal after the event loop was blocked past the lease', async () => {
    const locks = await res.lockClient({ keyPrefix: uniquePrefix('multi-blocked'), watchdogTimeoutMs: 300 });
    const lease = await locks.multiLock([locks.lock('quote:1'), locks.lock('quote:2')]).acquire();
    const signal = lease.signal;
    // No timer can run meanwhile: only the read itself can find the leases run out.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1_000);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBeInstanceOf(LockLostError);
    expect((signal.reason as LockLostError).reason).toBe('expired');
    await expect(lease.release()).rejects.toMatchObject({ code: 'NOT_OWNER' });
  });

  it('withLock rejects with the lost member’s LockLostError when a member is lost while it runs', async () => {
    const locks = await res.lockClient({
      keyPrefix: uniquePrefix('multi-loss-with'),
      watchdogTimeoutMs: 300,
    });
    const multi = locks.multiLock([locks.lock('refund:1'), locks.lock('refund:2')]);
    const error = await multi
      .withLock(async (lease) => {
        await admin.del(lease.leases[0]?.key ?? '');
        await new Promise((_, reject) => {
          lease.signal.addEventListener('abort', () => reject(new Error('work stopped')), { once: true });
        });
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockLostError);
    expect((error as LockLostError).cause).toMatchObject({ message: 'work stopped' });
    expect(await held([locks.lock('refund:2').key])).toBe(0);
  });

  it('keeps each kind its own behaviour: readers share, a writer and the others exclude, tokens grow', async () => {
    const keyPrefix = uniquePrefix('multi-kinds');
    const locks = await res.lockClient({ keyPrefix });
    const other = await res.lockClient({ keyPrefix });
    const handles: MemberHandle[] = [
      locks.lock('kinds:lock'),
      locks.fencedLock('kinds:fenced'),
      locks.fairLock('kinds:fair'),
      locks.simpleLock('kinds:simple'),
      locks.readWriteLock('kinds:catalog').readLock(),
      locks.readWriteLock('kinds:prices').writeLock(),
    ];
    const multi = locks.multiLock(handles);
    const lease = await multi.acquire({ waitMs: 5_000 });
    // A reader of the read member shares it; the others are excluded.
    const reader = await other.readWriteLock('kinds:catalog').readLock().tryAcquire();
    expect(reader).not.toBeNull();
    expect(await other.readWriteLock('kinds:prices').readLock().tryAcquire()).toBeNull();
    expect(await other.lock('kinds:lock').tryAcquire()).toBeNull();
    expect(await other.fairLock('kinds:fair').tryAcquire()).toBeNull();
    expect(await other.simpleLock('kinds:simple').tryAcquire()).toBeNull();
    const firstToken = (lease.leases[1] as FencedLease).token;
    await lease.release();
    await reader?.release();

    const again = await multi.acquire({ waitMs: 5_000 });
    expect((again.leases[1] as FencedLease).token).toBeGreaterThan(firstToken);
    await again.release();
    expect(await held(handles.map((handle) => handle.key))).toBe(0);
  });

  it('waits in a fair member’s line behind an owner queued first', async () => {
    const keyPrefix = uniquePrefix('multi-fair');
    const locks = await res.lockClient({ keyPrefix });
    const other = await res.lockClient({ keyPrefix });
    const third = await res.lockClient({ keyPrefix });
    const holder = await other.fairLock('desk:1').acquire();
    const order: string[] = [];
    const first = third
      .fairLock('desk:1')
      .acquire({ waitMs: 20_000 })
      .then(async (lease) => {
        order.push('queued first');
        await sleep(50);
        await lease.release();
      });
    await waitUntil(
      'the first waiter queued',
      async () => (await admin.lLen(`redisson_lock_queue:{${holder.key}}`)) === 1,
    );
    const multi = locks
      .multiLock([locks.lock('desk:0'), locks.fairLock('desk:1')])
      .acquire({ waitMs: 20_000 });
    await waitUntil(
      'the multi-lock queued',
      async () => (await admin.lLen(`redisson_lock_queue:{${holder.key}}`)) === 2,
    );
    await holder.release();
    const lease = await multi;
    order.push('multi-lock');
    await first;
    expect(order).toEqual(['queued first', 'multi-lock']);
    await lease.release();
  });

  it('re-enters reentrant members inside withLock and refuses a non-reentrant one again', async () => {
    const locks = await res.lockClient({ keyPrefix: uniquePrefix('multi-reentry') });
    const lock = locks.lock('shipment:1');
    const simple = locks.simpleLock('shipment:label');
    const multi = locks.multiLock([lock, simple]);
    await multi.withLock(async () => {
      const inner = await lock.acquire({ waitMs: 1_000 });
      expect(inner.holdCount).toBe(2);
      await inner.release();
      await expect(simple.acquire({ waitMs: 1_000 })).rejects.toBeInstanceOf(LockReentryError);
      await expect(multi.acquire({ waitMs: 1_000 })).rejects.toBeInstanceOf(LockReentryError);
      // The re-entry was refused before it took anything: the lock is held once, by this context.
      expect(await lock.holdCount()).toBe(1);
    });
    expect(await held([lock.key, simple.key])).toBe(0);
  });

  it("waits for a member a Redisson client holds through RLock's own script, and takes it when Redisson unlocks", async () => {
    const locks = await res.lockClient({ keyPrefix: uniquePrefix('multi-redisson') });
    const javaField = `${randomUUID()}:1`;
    const java = locks.lock('contract:b');
    const mine = locks.lock('contract:a');
    const channel = redissonChannel(java.key);
    expect(await redissonTryLock(admin, java.key, javaField)).toBeNull();

    const multi = locks.multiLock([java, mine]);
    expect(await multi.tryAcquire()).toBeNull();
    expect(await held([mine.key])).toBe(0);
    expect(await admin.hGetAll(java.key)).toEqual({ [javaField]: '1' });

    const acquiring = multi.acquire({ waitMs: 20_000 });
    await waitUntil(
      'the multi-lock waits on the Redisson channel',
      async () => (await res.numsub(channel)) >= 1,
    );
    await waitUntil('contract:a is held meanwhile', async () => (await held([mine.key])) === 1);
    const unlocked = await redissonUnlock(admin, java.key, javaField);
    expect(unlocked).toBe(1);
    const lease = await acquiring;
    expect(await held([mine.key, java.key])).toBe(2);
    await lease.release();
    // A Redisson client can take it again once the multi-lock let go.
    expect(await redissonTryLock(admin, java.key, javaField)).toBeNull();
    await admin.del(java.key);
  });

  it('refuses bad input with InvalidArgumentError, before any Redis command', async () => {
    const redis = await res.connectLocks();
    const locks = res.track(new LockClient(redis, { keyPrefix: uniquePrefix('multi-input') }));
    const stranger = await res.lockClient();
    const watched = {
      redis: commandsOf(redis),
      addr: await clientAddr(commandsOf(redis)),
      monitor: await res.monitor(),
    };
    const rw = locks.readWriteLock('price-list');
    const commands = await commandsDuring(watched, async () => {
      const refusals: Array<[() => unknown, RegExp]> = [
        [() => locks.multiLock([]), /at least one lock handle/],
        [() => locks.multiLock('order:1' as never), /to be an array of lock handles/],
        [
          () => locks.multiLock([locks.lock('a'), locks.semaphore('b')] as never),
          /`handles\[1\]` to be a lock handle.*got a Semaphore/,
        ],
        [
          () => locks.multiLock([locks.lock('a'), locks.permitSemaphore('b', { permits: 2 })]),
          /`handles\[1\]` to be a lock handle.*got a PermitSemaphore/,
        ],
        [
          () => locks.multiLock([locks.lock('a'), stranger.lock('b')]),
          /`handles\[1\]` \(lock "b"\) was made by another LockClient/,
        ],
        [
          () => locks.multiLock([rw.readLock(), rw.writeLock()]),
          /`handles\[0\]` and `handles\[1\]` are both on the key/,
        ],
        [() => locks.multiLock([locks.lock('a'), locks.fairLock('a')]), /both on the key/],
      ];
      for (const [make, message] of refusals) {
        expect(make).toThrow(InvalidArgumentError);
        expect(make).toThrow(message);
      }
      const multi = locks.multiLock([locks.lock('a'), locks.lock('b')]);
      await expect(multi.acquire({ waitMs: -1 })).rejects.toThrow(/`waitMs`/);
      await expect(multi.tryAcquire({ leaseMs: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(multi.acquire({ wait: 5 } as never)).rejects.toThrow(/Unknown option `wait`/);
      await expect(multi.withLock('run' as never)).rejects.toThrow(/`fn` to be a function/);
      await expect(multi.withLock(() => 1, { signal: 'x' as never })).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
    });
    expect(commands).toEqual([]);
  });

  it('takes free members on one node in one round trip', async () => {
    const { hostname, port } = new URL(url);
    const proxy = await startFaultProxy({ targetHost: hostname, targetPort: Number(port) });
    const redis = await connectClient({ url: proxy.url });
    try {
      const locks = res.track(new LockClient(redis, { keyPrefix: uniquePrefix('multi-rtt') }));
      // Past the server check and with the scripts cached before the count.
      await (await locks.lock('warm-up').acquire()).release();
      const rttMs = 2 * 250;
      proxy.setLatency(250);
      const multi = locks.multiLock(['a', 'b', 'c', 'd'].map((name) => locks.lock(`pallet:${name}`)));
      const startedAt = performance.now();
      const lease = await multi.acquire();
      const tookMs = performance.now() - startedAt;
      // One round trip: four in turn would take four times as long.
      expect(tookMs).toBeGreaterThanOrEqual(rttMs - 10);
      expect(tookMs).toBeLessThan(2 * rttMs);
      proxy.setLatency(0);
      await lease.release();
    } finally {
      destroyClient(redis);
      await proxy.close();
    }
  });
});
