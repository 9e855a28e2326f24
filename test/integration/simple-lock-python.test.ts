/**
 * redis-py's Lock (Python) and latchkey's SimpleLock on one key: each excludes the other, and
 * each side's release or expiry lets the other in. The Python side is a real redis-py client in
 * a child process (test/support/fixtures/redis_py_lock.py); its messages carry CLOCK_MONOTONIC
 * stamps, which compare directly with this process's now().
 *
 * Needs a python3 that can `import redis` (see test/support/python.ts); skipped, saying how to
 * install one, when there is none.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Worker, WorkerMessage } from '../support/child.js';
import { uniquePrefix } from '../support/keys.js';
import { redisPython, startRedisPyDriver } from '../support/python.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { msBetween, now, ofType, stamp } from '../support/stamps.js';
import { sleep, within } from '../support/wait.js';

const python = redisPython();
if (python.path === undefined) console.warn(`redis-py interop tests skipped: ${python.reason}`);

/** Python's hold in scenarios where it is released by hand: long enough never to expire. */
const PY_TIMEOUT_S = 5;
/** A waiting latchkey acquire re-checks a foreign hold at least this often (backoff cap ~250 ms). */
const LATCHKEY_RECHECK_BOUND_MS = 1_000;
/** After a foreign hold expires, the next re-check comes within min(PTTL, cap): soon. */
const LATCHKEY_EXPIRY_BOUND_MS = 500;
/** redis-py polls every `sleep` seconds (0.05 here); its blocking acquire must be this quick. */
const PY_SLEEP_S = 0.05;
const PY_RECHECK_BOUND_MS = 500;
const WATCHDOG_TIMEOUT_MS = 2_000;

function field<T>(msg: WorkerMessage, name: string): T {
  return msg[name] as T;
}

describe.skipIf(python.path === undefined)(
  python.path === undefined
    ? `redis-py Lock and latchkey SimpleLock (skipped: ${python.reason})`
    : `redis-py ${python.redisPyVersion} Lock and latchkey SimpleLock`,
  () => {
    let url: string;
    /** Reads the key as a bystander: a connection neither lock uses. */
    let observer: Redis;
    const perFile = testResources(() => url);
    const res = testResources(() => url);

    beforeAll(async () => {
      ({ url } = await sharedRedis());
      observer = await perFile.connect();
    });

    afterEach(() => res.closeAll());

    afterAll(() => perFile.closeAll());

    /** A SimpleLock under a prefix of its own, its full key, and a redis-py driver. */
    async function setUp(label: string) {
      const keyPrefix = uniquePrefix(label);
      const locks = await res.lockClient({ keyPrefix, watchdogTimeoutMs: WATCHDOG_TIMEOUT_MS });
      const name = 'report:daily';
      const py = await startRedisPyDriver(res, url);
      return { lock: locks.simpleLock(name), key: `${keyPrefix}${name}`, py };
    }

    /** Sends one command to the driver and waits for its answer. */
    async function call(py: Worker, op: string, args: object): Promise<WorkerMessage> {
      py.send({ op, ...args });
      return py.next(ofType(op));
    }

    it("the driver's stamps are on this process's monotonic clock", async () => {
      const { key, py } = await setUp('py-clock');
      const before = now();
      const answer = await call(py, 'locked', { name: key });
      const after = now();
      expect(field(answer, 'locked')).toBe(false);
      expect(stamp(answer)).toBeGreaterThan(before);
      expect(stamp(answer)).toBeLessThan(after);
    });

    it("while redis-py holds the key latchkey waits, and gets it after redis-py's release", async () => {
      const { lock, key, py } = await setUp('py-holds');
      const held = await call(py, 'acquire', { name: key, timeout: PY_TIMEOUT_S, blocking: false });
      expect(field(held, 'acquired')).toBe(true);
      const pyToken = field<string>(held, 'token');

      expect(await lock.tryAcquire()).toBeNull();
      expect(await lock.isLocked()).toBe(true);
      expect(await observer.get(key)).toBe(pyToken);

      let acquiredAt: bigint | undefined;
      const acquiring = lock.acquire({ waitMs: 10_000 }).then((lease) => {
        acquiredAt = now();
        return lease;
      });
      await sleep(300);
      expect(acquiredAt).toBeUndefined();

      const released = await call(py, 'release', { name: key });
      // Python's release script found its own token: latchkey never overwrote it while waiting.
      expect(field(released, 'released')).toBe(true);

      const lease = await within(acquiring, 5_000, "latchkey's acquire after redis-py's release");
      if (acquiredAt === undefined) throw new Error('acquire resolved without stamping');
      expect(acquiredAt).toBeGreaterThan(stamp(released, 'started'));
      expect(msBetween(stamp(released), acquiredAt)).toBeLessThan(LATCHKEY_RECHECK_BOUND_MS);
      expect(lease.key).toBe(key);

      const latchkeyToken = await observer.get(key);
      expect(latchkeyToken).not.toBeNull();
      expect(latchkeyToken).not.toBe(pyToken);
      await lease.release();
      expect(await observer.exists(key)).toBe(0);
    });

    it("while latchkey holds the key redis-py is refused, and gets it after latchkey's release", async () => {
      const { lock, key, py } = await setUp('lk-holds');
      const lease = await lock.acquire();
      const latchkeyToken = await observer.get(key);
      expect(latchkeyToken).not.toBeNull();

      const refused = await call(py, 'acquire', { name: key, timeout: PY_TIMEOUT_S, blocking: false });
      expect(field(refused, 'acquired')).toBe(false);
      expect(await observer.get(key)).toBe(latchkeyToken);

      py.send({
        op: 'acquire',
        name: key,
        timeout: PY_TIMEOUT_S,
        blocking: true,
        blocking_timeout: 5,
        sleep: PY_SLEEP_S,
      });
      await sleep(300);
      expect(py.messages.filter(ofType('acquire'))).toHaveLength(1);

      const releaseFrom = now();
      await lease.release();
      const releasedAt = now();

      const got = await py.next(ofType('acquire'), 10_000);
      expect(field(got, 'acquired')).toBe(true);
      // The blocking acquire was already waiting when latchkey let go, and succeeded only after.
      expect(stamp(got, 'started')).toBeLessThan(releaseFrom);
      expect(stamp(got)).toBeGreaterThan(releaseFrom);
      expect(msBetween(releasedAt, stamp(got))).toBeLessThan(PY_RECHECK_BOUND_MS);
      expect(await observer.get(key)).toBe(field(got, 'token'));

      expect(await lock.tryAcquire()).toBeNull();
      expect(field(await call(py, 'release', { name: key }), 'released')).toBe(true);
      expect(await observer.exists(key)).toBe(0);
    });

    it('a redis-py lock that expires unreleased lets a waiting latchkey in at its expiry, not before', async () => {
      const { lock, key, py } = await setUp('py-expires');
      const timeoutMs = 800;
      const held = await call(py, 'acquire', { name: key, timeout: timeoutMs / 1000, blocking: false });
      expect(field(held, 'acquired')).toBe(true);
      // SET ... PX ran between `started` and `t`, so the key lives until at least started + 800 ms
      // (less 1 ms for Redis rounding its clock to whole milliseconds).
      const earliestExpiry = stamp(held, 'started') + BigInt(timeoutMs - 1) * 1_000_000n;
      const latestExpiry = stamp(held) + BigInt(timeoutMs) * 1_000_000n;

      const lease = await within(lock.acquire({ waitMs: 10_000 }), 5_000, "latchkey's acquire at expiry");
      const acquiredAt = now();
      expect(acquiredAt).toBeGreaterThan(earliestExpiry);
      expect(msBetween(latestExpiry, acquiredAt)).toBeLessThan(LATCHKEY_EXPIRY_BOUND_MS);

      const value = await observer.get(key);
      expect(value).not.toBeNull();
      expect(value).not.toBe(field(held, 'token'));
      await lease.release();
    });

    it("latchkey's hold is a plain string token with a TTL, which redis-py does not take for its own", async () => {
      const { lock, key, py } = await setUp('lk-layout');
      // Python holds briefly first, so its Lock keeps a token that owned() compares.
      const held = await call(py, 'acquire', { name: key, timeout: 0.2, blocking: false });
      expect(field(held, 'acquired')).toBe(true);
      const before = await call(py, 'owned', { name: key });
      expect(field(before, 'owned')).toBe(true);

      const lease = await within(lock.acquire({ waitMs: 10_000 }), 5_000, "latchkey's acquire");
      expect(await observer.type(key)).toBe('string');
      const pttl = await observer.pTTL(key);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(WATCHDOG_TIMEOUT_MS);
      const latchkeyToken = await observer.get(key);
      expect(latchkeyToken).toMatch(/^\S+$/);
      expect(latchkeyToken).not.toBe(field(held, 'token'));

      const after = await call(py, 'owned', { name: key });
      expect(field(after, 'token')).toBe(field(held, 'token'));
      expect(field(after, 'owned')).toBe(false);
      expect(field(await call(py, 'locked', { name: key }), 'locked')).toBe(true);

      // Python's release (compare-and-delete) leaves latchkey's hold alone.
      const released = await call(py, 'release', { name: key });
      expect(field(released, 'released')).toBe(false);
      expect(field(released, 'error')).toMatch(/^LockNotOwnedError/);
      expect(await observer.get(key)).toBe(latchkeyToken);

      await lease.release();
      expect(await observer.exists(key)).toBe(0);
    });
  },
);
