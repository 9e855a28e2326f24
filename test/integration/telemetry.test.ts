import { readFileSync } from 'node:fs';
import { SpanStatusCode } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RESP_TYPES } from 'redis';
import type { LockLostError } from '../../src/index.js';
import {
  LockError,
  LockNotOwnedError,
  LockTimeoutError,
  type LockClient,
  type LockClientOptions,
} from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { KINDS, type Kind, type KindName } from '../support/kinds.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { everythingRecorded, registerTestTelemetry, type TestTelemetry } from '../support/telemetry.js';
import { watchEventLoopDelay } from '../support/stamps.js';
import { sleep, waitUntil } from '../support/wait.js';

/** The kind names telemetry reports, spelt out so that a renamed one fails here. */
const KIND_ATTRIBUTE: Record<KindName, string> = {
  lock: 'lock',
  fencedLock: 'fenced-lock',
  simpleLock: 'simple-lock',
  fairLock: 'fair-lock',
  permitSemaphore: 'permit-semaphore',
  readLock: 'read-lock',
  writeLock: 'write-lock',
};

const packageVersion = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

describe('OpenTelemetry spans and metrics', () => {
  /** A server of this file's own: one test freezes it. */
  let server: RedisInstance;
  let admin: Redis;
  let telemetry: TestTelemetry;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  beforeAll(async () => {
    telemetry = registerTestTelemetry();
    server = await startRedis();
    admin = await perFile.connect();
  });

  /** The key prefix of every client in the current test, so they share its locks. */
  let prefix: string;

  // Metrics restart from zero for each test, so each one sees only its own clients' points.
  beforeEach(async () => {
    prefix = uniquePrefix('telemetry');
    await telemetry.reset();
  });

  afterEach(() => res.closeAll());

  afterAll(async () => {
    await perFile.closeAll();
    await server.stop();
    await telemetry.shutdown();
  });

  function lockClient(options: LockClientOptions = {}): Promise<LockClient> {
    return res.lockClient({ keyPrefix: prefix, ...options });
  }

  /** The owners' secrets of the lock at `key` as Redis holds them: hash fields, or the token. */
  async function ownerSecrets(kind: Kind, key: string): Promise<string[]> {
    if (kind.name === 'permitSemaphore') {
      // Permit ids are stored as their 16 bytes; shown to users, and so searched for, in hex.
      const ids = await admin
        .withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer })
        .zRange(`{${key}}:timeout`, 0, -1);
      return ids.map((id) => Buffer.from(id).toString('hex'));
    }
    if (kind.keyType === 'string') {
      const token = await admin.get(key);
      return token === null ? [] : [token];
    }
    // A field is `<client id>:<owner id>`. The owner id alone is a small counter, secret only
    // with the client id (a UUID) before it, which must not show on its own either.
    // A read-write lock's `mode` field is no owner's.
    const fields = (await admin.hKeys(key)).filter((field) => field !== 'mode');
    return fields.flatMap((field) => [field, field.slice(0, field.indexOf(':'))]);
  }

  async function expectNoSecrets(secrets: readonly string[]): Promise<void> {
    expect(secrets.length).toBeGreaterThan(0);
    const recorded = await everythingRecorded(telemetry);
    expect(recorded.length).toBeGreaterThan(0);
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThanOrEqual(32);
      expect(recorded.filter((text) => text.includes(secret))).toEqual([]);
    }
  }

  describe.each(KINDS)('$name', (kind) => {
    const kindAttribute = { 'latchkey.lock.kind': KIND_ATTRIBUTE[kind.name] };

    it('reports an acquire and a release span, an acquisition, its wait and its hold time', async () => {
      const locks = await lockClient();
      const lock = kind.handle(locks, 'invoice:42');

      const lease = await lock.acquire();
      const secrets = await ownerSecrets(kind, lock.key);
      await sleep(30);
      await lease.release();

      const [acquire, ...moreAcquires] = telemetry.spans('latchkey.acquire');
      expect(moreAcquires).toEqual([]);
      expect(acquire?.instrumentationScope).toMatchObject({ name: 'latchkey', version: packageVersion });
      expect(acquire?.attributes).toEqual({
        'latchkey.lock.name': 'invoice:42',
        'latchkey.lock.kind': KIND_ATTRIBUTE[kind.name],
        'latchkey.acquire.outcome': 'acquired',
        'latchkey.acquire.waited_ms': expect.any(Number) as number,
        'latchkey.lock.hold_count': 1,
      });
      expect(acquire?.status.code).toBe(SpanStatusCode.UNSET);

      const [release, ...moreReleases] = telemetry.spans('latchkey.release');
      expect(moreReleases).toEqual([]);
      expect(release?.attributes).toEqual({
        'latchkey.lock.name': 'invoice:42',
        'latchkey.lock.kind': KIND_ATTRIBUTE[kind.name],
        'latchkey.release.outcome': 'released',
        'latchkey.lock.hold_count': 0,
      });

      expect(await telemetry.value('latchkey.acquisitions', kindAttribute)).toBe(1);
      expect(
        await telemetry.value('latchkey.acquire.wait', {
          ...kindAttribute,
          'latchkey.acquire.outcome': 'acquired',
        }),
      ).toBe(1);
      expect(await telemetry.value('latchkey.hold.duration', kindAttribute)).toBe(1);
      expect(await telemetry.histogramSum('latchkey.hold.duration', kindAttribute)).toBeGreaterThanOrEqual(
        25,
      );
      expect(await telemetry.value('latchkey.waiters', kindAttribute)).toBe(0);
      await expectNoSecrets(secrets);
    });

    it.runIf(kind.reentrant)('reports re-entries with their hold counts', async () => {
      const locks = await lockClient();
      const lock = kind.handle(locks, 'cart:7');

      await lock.withLock(async () => {
        await lock.withLock(async () => {});
      });

      expect(
        telemetry.spans('latchkey.acquire').map((span) => span.attributes['latchkey.lock.hold_count']),
      ).toEqual([1, 2]);
      expect(
        telemetry
          .spans('latchkey.release')
          .map((span) => [
            span.attributes['latchkey.release.outcome'],
            span.attributes['latchkey.lock.hold_count'],
          ]),
      ).toEqual([
        ['partial', 1],
        ['released', 0],
      ]);
      expect(await telemetry.value('latchkey.acquisitions', kindAttribute)).toBe(2);
      // One hold, from the first acquisition to the release that freed the lock.
      expect(await telemetry.value('latchkey.hold.duration', kindAttribute)).toBe(1);
    });

    // A second reader of a read lock gets straight in: nothing to wait for or time out.
    const exclusive = it.runIf(kind.exclusive);
    exclusive('counts a timeout and marks its span; a busy try and an abort are not timeouts', async () => {
      const holder = await lockClient();
      const name = 'report:daily';
      const held = await kind.handle(holder, name).acquire();
      const secrets = await ownerSecrets(kind, held.key);
      // Telemetry of the waiting client only: the holder's acquire is not under test here.
      await telemetry.reset();
      const locks = await lockClient();
      const lock = kind.handle(locks, name);

      await expect(lock.acquire({ waitMs: 150 })).rejects.toBeInstanceOf(LockTimeoutError);
      expect(await lock.tryAcquire()).toBeNull();
      // acquire() with no wait rejects where tryAcquire() resolves null: busy all the same.
      await expect(lock.acquire({ waitMs: 0 })).rejects.toBeInstanceOf(LockTimeoutError);
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error('order cancelled')), 50);
      await expect(lock.acquire({ signal: controller.signal })).rejects.toThrow('order cancelled');

      const spans = telemetry.spans('latchkey.acquire');
      expect(spans.map((span) => span.attributes['latchkey.acquire.outcome'])).toEqual([
        'timeout',
        'busy',
        'busy',
        'aborted',
      ]);
      expect(spans[0]?.attributes['latchkey.acquire.waited_ms']).toBeGreaterThanOrEqual(140);
      expect(spans.map((span) => span.status.code)).toEqual([
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
      ]);

      expect(await telemetry.value('latchkey.acquire.timeouts', kindAttribute)).toBe(1);
      expect(await telemetry.value('latchkey.acquisitions', kindAttribute)).toBe(0);
      const timeouts = { ...kindAttribute, 'latchkey.acquire.outcome': 'timeout' };
      expect(await telemetry.value('latchkey.acquire.wait', timeouts)).toBe(1);
      expect(await telemetry.histogramSum('latchkey.acquire.wait', timeouts)).toBeGreaterThanOrEqual(140);
      for (const [outcome, count] of [
        ['busy', 2],
        ['aborted', 1],
      ] as const) {
        expect(
          await telemetry.value('latchkey.acquire.wait', {
            ...kindAttribute,
            'latchkey.acquire.outcome': outcome,
          }),
        ).toBe(count);
      }
      expect(await telemetry.value('latchkey.waiters', kindAttribute)).toBe(0);
      await held.release();
      await expectNoSecrets(secrets);
    });

    exclusive('counts local waiters while they wait', async () => {
      const locks = await lockClient();
      const lock = kind.handle(locks, 'coupon:spring');
      const held = await lock.tryAcquire({ leaseMs: 10_000 });
      if (held === null) throw new Error('the lock was taken already');
      const other = await lockClient();

      const waiting = [
        kind.handle(other, 'coupon:spring').acquire(),
        kind.handle(other, 'coupon:spring').acquire(),
      ];
      await waitUntil(
        'both waiters are counted',
        async () => (await telemetry.value('latchkey.waiters', kindAttribute)) === 2,
      );
      await held.release();
      const first = await Promise.race(waiting);
      await waitUntil(
        'one waiter is left',
        async () => (await telemetry.value('latchkey.waiters', kindAttribute)) === 1,
      );
      await first.release();
      const leases = await Promise.all(waiting);
      await leases.find((lease) => lease !== first)?.release();
      expect(await telemetry.value('latchkey.waiters', kindAttribute)).toBe(0);
    });

    it('counts a lease lost to forceUnlock and one that expired, each with its reason', async () => {
      const locks = await lockClient();
      const lock = kind.handle(locks, 'ledger:7');

      const unlocked = await lock.acquire();
      const secrets = await ownerSecrets(kind, lock.key);
      expect(await lock.forceUnlock()).toBe(true);
      await expect(unlocked.release()).rejects.toBeInstanceOf(LockNotOwnedError);

      const expiring = await lock.acquire({ leaseMs: 100 });
      secrets.push(...(await ownerSecrets(kind, lock.key)));
      await waitUntil('the short lease is lost', () => expiring.signal.aborted);
      const reason = (expiring.signal.reason as LockLostError).reason;
      expect(reason).toBe('expired');

      expect(
        await telemetry.value('latchkey.leases.lost', {
          ...kindAttribute,
          'latchkey.lease.lost_reason': 'force-unlocked',
        }),
      ).toBe(1);
      expect(
        await telemetry.value('latchkey.leases.lost', {
          ...kindAttribute,
          'latchkey.lease.lost_reason': reason,
        }),
      ).toBe(1);
      expect(await telemetry.value('latchkey.leases.lost', kindAttribute)).toBe(2);
      // A lost hold ends there: its hold time is recorded once.
      expect(await telemetry.value('latchkey.hold.duration', kindAttribute)).toBe(2);

      const [release, ...more] = telemetry.spans('latchkey.release');
      expect(more).toEqual([]);
      expect(release?.attributes['latchkey.release.outcome']).toBe('not-owner');
      expect(release?.status.code).toBe(SpanStatusCode.ERROR);
      expect(release?.events.map((event) => event.name)).toEqual(['exception']);
      await expectNoSecrets(secrets);
    });

    it('counts renewals that failed while Redis was frozen', async () => {
      // Renewed every 400 ms, each renewal call given 400 ms; a 1,200 ms lease. Frozen, the
      // first renewal call fails at most 800 ms after the last confirmed one was sent, 400 ms
      // before the hold runs out: that much lateness of this process's timers the test allows.
      const watchdogTimeoutMs = 1_200;
      const intervalMs = watchdogTimeoutMs / 3;
      const retryDelayMs = intervalMs / 4;
      const locks = await lockClient({ watchdogTimeoutMs });
      let failedEvents = 0;
      locks.on('renewFailed', (event) => {
        failedEvents += event.names.length;
      });
      const lock = kind.handle(locks, 'payroll:march');
      const lease = await lock.acquire();
      const secrets = await ownerSecrets(kind, lock.key);

      // Frozen until the hold is given up: no renewal can be confirmed meanwhile. Thawed at
      // once then, so that a call still in flight is answered rather than failing for a hold
      // already lost.
      const delay = watchEventLoopDelay();
      lease.signal.addEventListener('abort', () => void server.resume(), { once: true });
      await server.pause();
      try {
        await waitUntil('the hold is given up', () => lease.signal.aborted, 10 * watchdogTimeoutMs);
      } finally {
        await server.resume();
      }
      const lateMs = delay.maxMs();
      delay.stop();
      expect((lease.signal.reason as LockLostError).reason).toBe('expired');
      // A renewal call in flight when the hold was given up is answered or fails in its time.
      await sleep(intervalMs + 50);

      // A process held up for as long as the margin may see its hold run out first.
      if (lateMs < intervalMs) expect(failedEvents).toBeGreaterThan(0);
      const counted = await telemetry.value('latchkey.renewals.failed', kindAttribute);
      // Held up for a retry's delay, a call sent just before the loss may fail after it: the
      // counter has it, the event (for held locks only) has not.
      if (lateMs < retryDelayMs) expect(counted).toBe(failedEvents);
      else expect(counted).toBeGreaterThanOrEqual(failedEvents);
      expect(
        await telemetry.value('latchkey.leases.lost', {
          ...kindAttribute,
          'latchkey.lease.lost_reason': 'expired',
        }),
      ).toBe(1);
      await expectNoSecrets(secrets);
    });
  });

  describe('semaphore', () => {
    const kindAttribute = { 'latchkey.lock.kind': 'semaphore' };

    it('reports acquire and release spans with the permits, the acquisitions and their wait', async () => {
      const locks = await lockClient();
      const exports = locks.semaphore('exports', { permits: 3 });

      await exports.acquire(2);
      await exports.release(2);
      expect(await exports.tryAcquire()).toBe(true);
      await exports.withPermits(async () => {});
      await exports.release();

      const acquires = telemetry.spans('latchkey.acquire');
      expect(acquires.map((span) => span.attributes)).toEqual(
        [2, 1, 1].map((permits) => ({
          'latchkey.lock.name': 'exports',
          'latchkey.lock.kind': 'semaphore',
          'latchkey.semaphore.permits': permits,
          'latchkey.acquire.outcome': 'acquired',
          'latchkey.acquire.waited_ms': expect.any(Number) as number,
        })),
      );
      expect(acquires[0]?.instrumentationScope).toMatchObject({ name: 'latchkey', version: packageVersion });
      expect(acquires.map((span) => span.status.code)).toEqual([
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
      ]);
      // withPermits gives its permit back with a release of its own.
      expect(telemetry.spans('latchkey.release').map((span) => span.attributes)).toEqual(
        [2, 1, 1].map((permits) => ({
          'latchkey.lock.name': 'exports',
          'latchkey.lock.kind': 'semaphore',
          'latchkey.semaphore.permits': permits,
          'latchkey.release.outcome': 'released',
        })),
      );

      expect(await telemetry.value('latchkey.acquisitions', kindAttribute)).toBe(3);
      expect(
        await telemetry.value('latchkey.acquire.wait', {
          ...kindAttribute,
          'latchkey.acquire.outcome': 'acquired',
        }),
      ).toBe(3);
      expect(await telemetry.value('latchkey.acquire.timeouts', kindAttribute)).toBe(0);
      expect(await telemetry.value('latchkey.waiters', kindAttribute)).toBe(0);
      // Permits have no owner: nothing is held from one call to the next, so no hold time.
      expect(await telemetry.value('latchkey.hold.duration', kindAttribute)).toBe(0);
    });

    it('counts a timeout, busy tries, an abort and the waiters while they wait', async () => {
      const holder = await lockClient();
      await holder.semaphore('pdf-renderers', { permits: 1 }).acquire();
      await telemetry.reset();
      const locks = await lockClient();
      const renderers = locks.semaphore('pdf-renderers', { permits: 1 });

      await expect(renderers.acquire({ waitMs: 150 })).rejects.toBeInstanceOf(LockTimeoutError);
      expect(await renderers.tryAcquire()).toBe(false);
      await expect(renderers.acquire({ waitMs: 0 })).rejects.toBeInstanceOf(LockTimeoutError);
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error('render cancelled')), 50);
      await expect(renderers.acquire({ signal: controller.signal })).rejects.toThrow('render cancelled');

      const spans = telemetry.spans('latchkey.acquire');
      expect(spans.map((span) => span.attributes['latchkey.acquire.outcome'])).toEqual([
        'timeout',
        'busy',
        'busy',
        'aborted',
      ]);
      expect(spans[0]?.attributes['latchkey.acquire.waited_ms']).toBeGreaterThanOrEqual(140);
      expect(spans.map((span) => span.status.code)).toEqual([
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
      ]);
      expect(await telemetry.value('latchkey.acquire.timeouts', kindAttribute)).toBe(1);
      const timeouts = { ...kindAttribute, 'latchkey.acquire.outcome': 'timeout' };
      expect(await telemetry.histogramSum('latchkey.acquire.wait', timeouts)).toBeGreaterThanOrEqual(140);
      for (const [outcome, count] of [
        ['busy', 2],
        ['aborted', 1],
      ] as const) {
        expect(
          await telemetry.value('latchkey.acquire.wait', {
            ...kindAttribute,
            'latchkey.acquire.outcome': outcome,
          }),
        ).toBe(count);
      }
      expect(await telemetry.value('latchkey.acquisitions', kindAttribute)).toBe(0);
      expect(await telemetry.value('latchkey.waiters', kindAttribute)).toBe(0);

      // Two waiters, counted while they wait; one permit given back lets one of them in.
      const waiting = [renderers.acquire(), locks.semaphore('pdf-renderers').acquire()];
      await waitUntil(
        'both waiters are counted',
        async () => (await telemetry.value('latchkey.waiters', kindAttribute)) === 2,
      );
      await holder.semaphore('pdf-renderers').release();
      await Promise.race(waiting);
      await waitUntil(
        'one waiter is left',
        async () => (await telemetry.value('latchkey.waiters', kindAttribute)) === 1,
      );
      await renderers.release();
      await Promise.all(waiting);
      expect(await telemetry.value('latchkey.waiters', kindAttribute)).toBe(0);
      expect(await telemetry.value('latchkey.acquisitions', kindAttribute)).toBe(2);
    });

    it('marks an acquire and a release that Redis failed', async () => {
      const locks = await lockClient({ commandTimeoutMs: 100 });
      const uploads = locks.semaphore('uploads', { permits: 1 });
      await uploads.tryAcquire();
      await telemetry.reset();
      const frozen = await lockClient({ commandTimeoutMs: 100 });
      const stalled = frozen.semaphore('uploads', { permits: 1 });
      await stalled.availablePermits();

      await server.pause();
      try {
        await expect(stalled.tryAcquire()).rejects.toBeInstanceOf(LockError);
        await expect(stalled.release()).rejects.toBeInstanceOf(LockError);
      } finally {
        await server.resume();
      }

      for (const name of ['latchkey.acquire', 'latchkey.release']) {
        const [span, ...more] = telemetry.spans(name);
        expect(more).toEqual([]);
        expect(span?.status.code).toBe(SpanStatusCode.ERROR);
        expect(span?.events.map((event) => event.name)).toEqual(['exception']);
      }
      expect(telemetry.spans('latchkey.acquire')[0]?.attributes['latchkey.acquire.outcome']).toBe('error');
      expect(telemetry.spans('latchkey.release')[0]?.attributes['latchkey.release.outcome']).toBe('error');
      expect(
        await telemetry.value('latchkey.acquire.wait', {
          ...kindAttribute,
          'latchkey.acquire.outcome': 'error',
        }),
      ).toBe(1);
    });
  });

  describe('count-down latch', () => {
    const kindAttribute = { 'latchkey.lock.kind': 'count-down-latch' };

    it('reports awaits with their outcome and wait, count-downs with the count left, and the waiters', async () => {
      const locks = await lockClient();
      const warmup = locks.countDownLatch('cache-warmup');
      await warmup.trySetCount(2);

      expect(await warmup.await({ waitMs: 0 })).toBe(false);
      expect(await warmup.await({ waitMs: 120 })).toBe(false);
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error('shutting down')), 50);
      await expect(warmup.await({ signal: controller.signal })).rejects.toThrow('shutting down');
      const waiting = locks.countDownLatch('cache-warmup').await();
      await waitUntil(
        'the waiter is counted',
        async () => (await telemetry.value('latchkey.waiters', kindAttribute)) === 1,
      );
      expect(await warmup.countDown()).toBe(1);
      expect(await warmup.countDown()).toBe(0);
      expect(await waiting).toBe(true);

      const awaits = telemetry.spans('latchkey.await');
      expect(awaits.map((span) => span.attributes['latchkey.await.outcome'])).toEqual([
        'closed',
        'timeout',
        'aborted',
        'opened',
      ]);
      expect(awaits[0]?.attributes).toEqual({
        'latchkey.lock.name': 'cache-warmup',
        'latchkey.lock.kind': 'count-down-latch',
        'latchkey.await.outcome': 'closed',
        'latchkey.await.waited_ms': expect.any(Number) as number,
      });
      expect(awaits[1]?.attributes['latchkey.await.waited_ms']).toBeGreaterThanOrEqual(110);
      expect(awaits.map((span) => span.status.code)).toEqual([
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
        SpanStatusCode.UNSET,
      ]);
      expect(telemetry.spans('latchkey.count_down').map((span) => span.attributes)).toEqual(
        [1, 0].map((count) => ({
          'latchkey.lock.name': 'cache-warmup',
          'latchkey.lock.kind': 'count-down-latch',
          'latchkey.latch.count': count,
        })),
      );

      for (const outcome of ['closed', 'timeout', 'aborted', 'opened']) {
        expect(
          await telemetry.value('latchkey.await.wait', {
            ...kindAttribute,
            'latchkey.await.outcome': outcome,
          }),
        ).toBe(1);
      }
      expect(
        await telemetry.histogramSum('latchkey.await.wait', {
          ...kindAttribute,
          'latchkey.await.outcome': 'timeout',
        }),
      ).toBeGreaterThanOrEqual(110);
      expect(await telemetry.value('latchkey.waiters', kindAttribute)).toBe(0);
      // A latch takes nothing: no acquisition is counted.
      expect(await telemetry.value('latchkey.acquisitions', kindAttribute)).toBe(0);
    });

    it('marks an await and a count-down that Redis failed', async () => {
      const locks = await lockClient({ commandTimeoutMs: 100 });
      const latch = locks.countDownLatch('nightly-import');
      await latch.trySetCount(1);
      await telemetry.reset();
      const frozen = await lockClient({ commandTimeoutMs: 100 });
      const stalled = frozen.countDownLatch('nightly-import');
      await stalled.count();

      await server.pause();
      try {
        await expect(stalled.await({ waitMs: 0 })).rejects.toBeInstanceOf(LockError);
        await expect(stalled.countDown()).rejects.toBeInstanceOf(LockError);
      } finally {
        await server.resume();
      }

      for (const name of ['latchkey.await', 'latchkey.count_down']) {
        const [span, ...more] = telemetry.spans(name);
        expect(more).toEqual([]);
        expect(span?.status.code).toBe(SpanStatusCode.ERROR);
        expect(span?.events.map((event) => event.name)).toEqual(['exception']);
      }
      expect(telemetry.spans('latchkey.await')[0]?.attributes['latchkey.await.outcome']).toBe('error');
      expect(
        await telemetry.value('latchkey.await.wait', { ...kindAttribute, 'latchkey.await.outcome': 'error' }),
      ).toBe(1);
    });
  });

  it('reports nothing for a client created with telemetry: false', async () => {
    const locks = await lockClient({ telemetry: false });
    const lock = locks.lock('invoice:43');
    await lock.withLock(async () => {});
    await lock.acquire({ leaseMs: 50 });
    const semaphore = locks.semaphore('exports', { permits: 1 });
    await semaphore.withPermits(async () => {});
    expect(await semaphore.tryAcquire({ waitMs: 30 })).toBe(true);
    expect(await semaphore.tryAcquire({ waitMs: 30 })).toBe(false);
    const latch = locks.countDownLatch('cache-warmup');
    await latch.trySetCount(1);
    expect(await latch.await({ waitMs: 30 })).toBe(false);
    await latch.countDown();
    await sleep(120);

    expect(telemetry.spans()).toEqual([]);
    const recorded = await telemetry.metrics();
    expect(
      recorded.filter((metric) => metric.dataPoints.length > 0).map((metric) => metric.descriptor.name),
    ).toEqual([]);
  });
});
