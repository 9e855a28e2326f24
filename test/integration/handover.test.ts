/**
 * The wait queue: a release hands the lock straight to the longest-waiting live waiter, whose
 * client then holds it without asking again; waiters of different clients are served in
 * arrival order; a waiter whose process died is skipped; a waiter that gave up is out of the
 * queue before its call returns.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockTimeoutError, type Lease } from '../../src/index.js';
import { queueOf, uniquePrefix } from '../support/keys.js';
import { clientAddr, commandsFrom } from '../support/monitor.js';
import { sharedRedis } from '../support/redis-server.js';
import { commandsOf } from '../support/clients.js';
import { channelOf, testResources, type Redis } from '../support/resources.js';
import { sleep, waitUntil, within } from '../support/wait.js';

const WAITER = new URL('../support/fixtures/waiting-waiter.ts', import.meta.url).pathname;

describe('the wait queue', () => {
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

  const queued = async (key: string): Promise<number> => Number(await admin.lLen(queueOf(key)));

  it('hands the lock to a waiting client, which takes it without sending anything', async () => {
    const prefix = uniquePrefix('handover-direct');
    const key = `${prefix}invoice:42`;
    const holder = await res.lockClient({ keyPrefix: prefix });
    const lease = await holder.lock('invoice:42').acquire();

    const waiterRedis = await res.connectLocks();
    const waiterLocks = res.track(new LockClient(waiterRedis, { keyPrefix: prefix }));
    const waiterAddr = await clientAddr(commandsOf(waiterRedis));
    const waiting = waiterLocks.lock('invoice:42').acquire();
    await waitUntil('the waiter is queued', async () => (await queued(key)) === 1, 10_000);

    const monitor = await res.monitor();
    await lease.release();
    const handed = await within(waiting, 2_000, 'the hand-over');
    expect(handed.holdCount).toBe(1);
    // Its owner field is the only one, at count 1, and the queue is empty.
    expect(await admin.hVals(key)).toEqual(['1']);
    expect(await queued(key)).toBe(0);
    // Nothing went from the waiter's connection to Redis between the release and now.
    const sent = commandsFrom(monitor.lines, { clientAddr: waiterAddr });
    expect(sent).toEqual([]);
    // No unlock message either: the lock never was free.
    const publishes = commandsFrom(monitor.lines).filter((cmd) => cmd[0]?.toUpperCase() === 'PUBLISH');
    expect(publishes.map((cmd) => cmd[1])).not.toContain(channelOf(key));

    await handed.release();
    expect(await admin.exists(key)).toBe(0);
  });

  it('serves waiters of different clients in the order they arrived', async () => {
    const prefix = uniquePrefix('handover-fifo');
    const key = `${prefix}coupon:7`;
    const holder = await res.lockClient({ keyPrefix: prefix });
    const first = await holder.lock('coupon:7').acquire();

    const order: number[] = [];
    let inside = 0;
    let mostInside = 0;
    const clients = await Promise.all(Array.from({ length: 5 }, () => res.lockClient({ keyPrefix: prefix })));
    const runs: Promise<void>[] = [];
    for (const [index, locks] of clients.entries()) {
      runs.push(
        locks
          .lock('coupon:7')
          .acquire()
          .then(async (lease: Lease) => {
            inside += 1;
            mostInside = Math.max(mostInside, inside);
            order.push(index);
            await sleep(5);
            inside -= 1;
            await lease.release();
          }),
      );
      // The next client arrives once this one is queued.
      await waitUntil(`waiter ${index} is queued`, async () => (await queued(key)) === index + 1, 10_000);
    }

    await first.release();
    await within(Promise.all(runs), 5_000, 'all hand-overs');
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(mostInside).toBe(1);
    expect(await admin.exists(key)).toBe(0);
    expect(await queued(key)).toBe(0);
  });

  it('lets a waiter that was handed the lock release it and wait again at once, ahead of its own clean-up', async () => {
    // The caller goes on before the waiter leaves the local queue; whatever it does in that
    // same turn must find the queue and the hold as a settled acquire leaves them.
    const prefix = uniquePrefix('handover-same-turn');
    const key = `${prefix}report:3`;
    const holder = await res.lockClient({ keyPrefix: prefix });
    const first = await holder.lock('report:3').acquire();
    const locks = await res.lockClient({ keyPrefix: prefix });
    const lock = locks.lock('report:3');

    let inside = 0;
    let mostInside = 0;
    const order: string[] = [];
    const enter = (who: string): void => {
      inside += 1;
      mostInside = Math.max(mostInside, inside);
      order.push(who);
    };
    let again: Promise<Lease> | undefined;
    const firstWaiter = lock.acquire().then((lease) => {
      enter('first');
      // In the same turn as the hand-over: give the lock back and queue again behind the second.
      inside -= 1;
      const released = lease.release();
      again = lock.acquire();
      return released;
    });
    await waitUntil('the first waiter is queued', async () => (await queued(key)) === 1, 10_000);
    const secondWaiter = lock.acquire().then(async (lease) => {
      enter('second');
      await sleep(5);
      inside -= 1;
      await lease.release();
    });
    await waitUntil('the second waiter is queued', async () => (await queued(key)) === 2, 10_000);

    await first.release();
    await within(Promise.all([firstWaiter, secondWaiter]), 5_000, 'both hand-overs');
    const last = await within(
      again ?? Promise.reject(new Error('the first waiter never ran')),
      5_000,
      'the hand-over back',
    );
    enter('first again');
    expect(order).toEqual(['first', 'second', 'first again']);
    expect(mostInside).toBe(1);
    expect(last.holdCount).toBe(1);
    await last.release();
    expect(await admin.exists(key)).toBe(0);
    expect(await queued(key)).toBe(0);
  });

  it('skips a waiter whose process was killed and hands the lock to the next one', async () => {
    const prefix = uniquePrefix('handover-dead');
    const name = 'settlement:nightly';
    const key = prefix + name;
    const holder = await res.lockClient({ keyPrefix: prefix });
    const lease = await holder.lock(name).acquire();

    const worker = res.worker(WAITER, { REDIS_URL: url, KEY_PREFIX: prefix, LOCK_NAME: name });
    await worker.next((msg) => msg['type'] === 'ready', 20_000);
    worker.send({ type: 'acquire' });
    await waitUntil('the worker is queued', async () => (await queued(key)) === 1, 10_000);

    const next = await res.lockClient({ keyPrefix: prefix });
    const waiting = next.lock(name).acquire();
    await waitUntil('the second waiter is queued', async () => (await queued(key)) === 2, 10_000);

    worker.kill('SIGKILL');
    await worker.exited;
    // The server notices the dead connection; the worker's queue entry stays until a release.
    await waitUntil(
      'the dead worker left the channel',
      async () => (await res.numsub(channelOf(key))) === 1,
      10_000,
    );
    expect(await queued(key)).toBe(2);

    await lease.release();
    const handed = await within(waiting, 2_000, 'the hand-over past the dead waiter');
    expect(await admin.hVals(key)).toEqual(['1']);
    expect(await queued(key)).toBe(0);
    await handed.release();
    expect(await admin.exists(key)).toBe(0);
  });

  it('takes a waiter that timed out or was aborted out of the queue before its call returns', async () => {
    const prefix = uniquePrefix('handover-gaveup');
    const key = `${prefix}report:daily`;
    const holder = await res.lockClient({ keyPrefix: prefix });
    const lease = await holder.lock('report:daily').acquire();
    const other = await res.lockClient({ keyPrefix: prefix });

    await expect(other.lock('report:daily').acquire({ waitMs: 300 })).rejects.toBeInstanceOf(
      LockTimeoutError,
    );
    expect(await queued(key)).toBe(0);

    const controller = new AbortController();
    const aborted = other.lock('report:daily').acquire({ signal: controller.signal });
    await waitUntil('the waiter is queued', async () => (await queued(key)) === 1, 10_000);
    const reason = new Error('shift ended');
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    expect(await queued(key)).toBe(0);

    // Nobody waits any more: the release frees the lock.
    await lease.release();
    expect(await admin.exists(key)).toBe(0);
  });

  it('keeps the queue only for a while after the holder’s lease', async () => {
    const prefix = uniquePrefix('handover-ttl');
    const key = `${prefix}cart:9`;
    const holder = await res.lockClient({ keyPrefix: prefix });
    const lease = await holder.lock('cart:9').acquire();
    const waiter = await res.lockClient({ keyPrefix: prefix });
    const waiting = waiter.lock('cart:9').acquire();
    await waitUntil('the waiter is queued', async () => (await queued(key)) === 1, 10_000);

    const lockTtl = Number(await admin.pTTL(key));
    const queueTtl = Number(await admin.pTTL(queueOf(key)));
    expect(queueTtl).toBeGreaterThan(lockTtl);
    expect(queueTtl).toBeLessThanOrEqual(lockTtl + 61_000);

    await lease.release();
    await (await waiting).release();
    expect(await admin.exists(queueOf(key))).toBe(0);
  });
});
