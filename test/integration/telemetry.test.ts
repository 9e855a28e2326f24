import { readFileSync } from 'node:fs';
import { SpanStatusCode } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RESP_TYPES } from 'redis';
import type { LockLostError } from '../../src/index.js';
import {
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
      // Renewed every 100 ms, each renewal call timing out after 100 ms; a 300 ms lease.
      const locks = await lockClient({ watchdogTimeoutMs: 300 });
      let failedEvents = 0;
      locks.on('renewFailed', (event) => {
        failedEvents += event.names.length;
      });
      const lock = kind.handle(locks, 'payroll:march');
      const lease = await lock.acquire();
      const secrets = await ownerSecrets(kind, lock.key);

      // Frozen for longer than the lease: no renewal can be confirmed, so the hold expires.
      await server.pause();
      try {
        await sleep(400);
      } finally {
        await server.resume();
      }
      await waitUntil('the hold is given up', () => lease.signal.aborted);
      expect((lease.signal.reason as LockLostError).reason).toBe('expired');
      // A renewal call still in flight when the hold was given up fails within its 100 ms.
      await sleep(150);

      expect(failedEvents).toBeGreaterThan(0);
      expect(await telemetry.value('latchkey.renewals.failed', kindAttribute)).toBe(failedEvents);
      expect(
        await telemetry.value('latchkey.leases.lost', {
          ...kindAttribute,
          'latchkey.lease.lost_reason': 'expired',
        }),
      ).toBe(1);
      await expectNoSecrets(secrets);
    });
  });

  it('reports nothing for a client created with telemetry: false', async () => {
    const locks = await lockClient({ telemetry: false });
    const lock = locks.lock('invoice:43');
    await lock.withLock(async () => {});
    await lock.acquire({ leaseMs: 50 });
    await sleep(120);

    expect(telemetry.spans()).toEqual([]);
    const recorded = await telemetry.metrics();
    expect(
      recorded.filter((metric) => metric.dataPoints.length > 0).map((metric) => metric.descriptor.name),
    ).toEqual([]);
  });
});
