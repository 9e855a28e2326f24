import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  LockClient,
  LockLostError,
  LockNotOwnedError,
  type Lease,
  type LockLostEvent,
  type RenewFailedEvent,
} from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { sharedRedis, startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';
import { watchEventLoopDelay } from '../support/stamps.js';
import { sleep } from '../support/wait.js';

interface Timed<T> {
  readonly at: number;
  readonly value: T;
}

/** Resolves with the abort reason and the monotonic time the signal aborted. */
function abortOf(signal: AbortSignal, timeoutMs: number): Promise<Timed<unknown>> {
  if (signal.aborted) return Promise.resolve({ at: performance.now(), value: signal.reason as unknown });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      reject(new Error(`the lease's signal did not abort within ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve({ at: performance.now(), value: signal.reason });
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function recordLockLost(locks: LockClient): Timed<LockLostEvent>[] {
  const events: Timed<LockLostEvent>[] = [];
  locks.on('lockLost', (event) => events.push({ at: performance.now(), value: event }));
  return events;
}

function expectLost(reason: unknown, kind: LockLostError['reason']): void {
  expect(reason).toBeInstanceOf(LockLostError);
  expect((reason as LockLostError).code).toBe('LOCK_LOST');
  expect((reason as LockLostError).reason).toBe(kind);
}

/** The single owner field of a lock hash (read to tamper with it, never printed). */
async function onlyField(redis: Redis, key: string): Promise<string> {
  const fields = await redis.hKeys(key);
  expect(fields).toHaveLength(1);
  const field = fields[0];
  if (field === undefined) throw new Error('the lock hash has no field');
  return field;
}

const WATCHDOG_MS = 300;
const RENEW_INTERVAL_MS = WATCHDOG_MS / 3;
const SLACK_MS = 150;

describe('losing a held lock', () => {
  let url: string;
  let redis: LockConnection;
  let tamper: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connectLocks();
    tamper = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  /** All on the one connection `redis`. */
  function lockClient(keyPrefix: string, watchdogTimeoutMs = WATCHDOG_MS): LockClient {
    return res.track(new LockClient(redis, { watchdogTimeoutMs, keyPrefix }));
  }

  const foreignField = `${randomUUID()}:1`;
  const tampers: readonly {
    readonly what: string;
    readonly act: (key: string) => Promise<void>;
    /** What the key holds once the holder has been told, or null when it is gone. */
    readonly leaves: Record<string, string> | null;
  }[] = [
    {
      what: 'the key is deleted',
      act: async (key) => {
        await tamper.del(key);
      },
      leaves: null,
    },
    {
      what: 'its only owner field is removed',
      act: async (key) => {
        await tamper.hDel(key, await onlyField(tamper, key));
      },
      leaves: null,
    },
    {
      what: 'its owner field is removed while another field stays',
      act: async (key) => {
        const field = await onlyField(tamper, key);
        await tamper.hSet(key, foreignField, '1');
        await tamper.hDel(key, field);
      },
      leaves: { [foreignField]: '1' },
    },
    {
      what: "the key is replaced by another owner's hash",
      act: async (key) => {
        await tamper.multi().del(key).hSet(key, foreignField, '1').pExpire(key, 10_000).exec();
      },
      leaves: { [foreignField]: '1' },
    },
  ];

  it.each(tampers)('aborts the lease and emits lockLost within one renewal when $what', async (t) => {
    const locks = lockClient(uniquePrefix('loss-tamper'));
    const lost = recordLockLost(locks);
    const lease = await locks.lock('invoice:42').acquire();
    expect(await tamper.exists(lease.key)).toBe(1);
    expect(lease.signal.aborted).toBe(false);

    const aborted = abortOf(lease.signal, 5_000);
    await t.act(lease.key);
    const tamperedAt = performance.now();
    const { at, value: reason } = await aborted;

    expectLost(reason, 'not-owner');
    expect(at - tamperedAt).toBeLessThanOrEqual(RENEW_INTERVAL_MS + SLACK_MS);
    expect(lost).toHaveLength(1);
    const event = lost[0];
    expect(event?.value.error).toBe(reason);
    expect(event?.value.name).toBe('invoice:42');
    expect(event?.value.key).toBe(lease.key);
    expect((event?.at ?? Number.POSITIVE_INFINITY) - tamperedAt).toBeLessThanOrEqual(
      RENEW_INTERVAL_MS + SLACK_MS,
    );
    expect(lease.holdCount).toBe(0);

    // The holder leaves whatever now sits under the key alone.
    if (t.leaves === null) {
      expect(await tamper.exists(lease.key)).toBe(0);
    } else {
      expect(await tamper.hGetAll(lease.key)).toEqual(t.leaves);
      expect(await tamper.pTTL(lease.key)).toBeGreaterThan(0);
      await tamper.del(lease.key);
    }
  });

  describe("releasing a lost lease never touches the new holder's lock", () => {
    async function expectReleaseRejectedAndHashKept(lease: Lease, newHolder: Lease): Promise<void> {
      const before = await tamper.hGetAll(newHolder.key);
      const pttlBefore = await tamper.pTTL(newHolder.key);
      expect(Object.keys(before)).toHaveLength(1);
      expect(pttlBefore).toBeGreaterThan(0);

      const release = lease.release();
      await expect(release).rejects.toBeInstanceOf(LockNotOwnedError);
      await expect(release).rejects.toMatchObject({ code: 'NOT_OWNER' });

      expect(await tamper.hGetAll(newHolder.key)).toEqual(before);
      const pttlAfter = await tamper.pTTL(newHolder.key);
      expect(pttlAfter).toBeGreaterThan(0);
      expect(pttlAfter).toBeLessThanOrEqual(pttlBefore);
      expect(newHolder.signal.aborted).toBe(false);
      // A second release of the same lease is refused too.
      await expect(lease.release()).rejects.toBeInstanceOf(LockNotOwnedError);
      expect(await tamper.hGetAll(newHolder.key)).toEqual(before);
    }

    it('after the loss was detected', async () => {
      const keyPrefix = uniquePrefix('loss-release');
      const locks = lockClient(keyPrefix);
      const others = lockClient(keyPrefix);
      const lease = await locks.lock('invoice:7').acquire();
      const aborted = abortOf(lease.signal, 5_000);
      await tamper.del(lease.key);
      expectLost((await aborted).value, 'not-owner');

      const newHolder = await others.lock('invoice:7').acquire({ leaseMs: 10_000 });
      await expectReleaseRejectedAndHashKept(lease, newHolder);
    });

    it('when the lock was taken over before the holder noticed', async () => {
      const keyPrefix = uniquePrefix('loss-takeover');
      // The first renewal would come after 10 s: the holder cannot have noticed anything.
      const locks = lockClient(keyPrefix, 30_000);
      const others = lockClient(keyPrefix);
      const lost = recordLockLost(locks);
      const lease = await locks.lock('invoice:8').acquire();
      await tamper.del(lease.key);
      const newHolder = await others.lock('invoice:8').acquire({ leaseMs: 10_000 });
      expect(lease.signal.aborted).toBe(false);

      await expectReleaseRejectedAndHashKept(lease, newHolder);
      // The refused release is how the holder learns it lost the lock.
      expectLost(lease.signal.reason, 'not-owner');
      expect(lost.map((event) => event.value.error)).toEqual([lease.signal.reason]);
    });
  });
});

describe('losing a held lock while Redis is unreachable', () => {
  let server: RedisInstance;
  let redis: LockConnection;
  let admin: Redis;
  const res = testResources(() => server.url);

  beforeAll(async () => {
    server = await startRedis();
    redis = await res.connectLocks();
    admin = await res.connect();
  });

  afterAll(async () => {
    await res.closeAll();
    // Unset when beforeAll could not start a server; its own error says why.
    await server?.stop();
  });

  it('declares the loss by its own clock before the server-side lease can lapse', async () => {
    const watchdogTimeoutMs = 2_000;
    const locks = res.track(
      new LockClient(redis, { watchdogTimeoutMs, keyPrefix: uniquePrefix('loss-pause') }),
    );
    const lost = recordLockLost(locks);
    const renewFailures: RenewFailedEvent[] = [];
    locks.on('renewFailed', (event) => renewFailures.push(event));

    const delay = watchEventLoopDelay();
    const acquireStartedAt = performance.now();
    const lease = await locks.lock('payout:run').acquire();
    // The request went out between these two instants (after the client's first server check).
    const acquiredAt = performance.now();
    // Frozen before the first renewal (a third of the lease away): no renewal can succeed,
    // so the lease ends at most `watchdogTimeoutMs` after the acquire request went out.
    await server.pause();
    const pausedAt = performance.now();
    let abortedAt: number;
    let reason: unknown;
    try {
      expect(pausedAt - acquireStartedAt).toBeLessThan(watchdogTimeoutMs / 3);
      ({ at: abortedAt, value: reason } = await abortOf(lease.signal, watchdogTimeoutMs + 3_000));
    } finally {
      delay.stop();
      await server.resume();
    }

    expectLost(reason, 'expired');
    // At the deadline counted from the request, by the holder's timer: late only by as much as
    // this process's event loop was held up (a busy machine's scheduler; 7 ms seen at load 15),
    // and by the timer's whole-millisecond rounding.
    expect(abortedAt).toBeLessThanOrEqual(acquiredAt + watchdogTimeoutMs + delay.maxMs() + 1);
    expect(abortedAt).toBeGreaterThanOrEqual(acquireStartedAt + watchdogTimeoutMs - 100);
    expect(renewFailures.length).toBeGreaterThan(0);
    expect(renewFailures.every((event) => event.names.includes('payout:run'))).toBe(true);
    expect(lost.map((event) => event.value.error)).toEqual([reason]);

    // Once the server-side lease is over, the lock is gone: whatever renewal the frozen server
    // still ran on resuming, the holder's clean-up after the loss removed its field.
    await sleep(acquireStartedAt + watchdogTimeoutMs + 200 - performance.now());
    await expect(admin.exists(lease.key)).resolves.toBe(0);
    await expect(lease.release()).rejects.toBeInstanceOf(LockNotOwnedError);
  });
});
