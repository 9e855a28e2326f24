// Where `@opentelemetry/api` cannot be loaded, every kind works as before and reports nothing,
// even with an SDK registered: the loader is made to find no API, as on a machine without it.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type * as TelemetryModule from '../../src/engine/telemetry.js';
import { LockNotOwnedError, LockTimeoutError, type LockClient, type LockLostError } from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { KINDS } from '../support/kinds.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources } from '../support/resources.js';
import { registerTestTelemetry, type TestTelemetry } from '../support/telemetry.js';
import { waitUntil } from '../support/wait.js';

const loader = vi.hoisted(() => ({ calls: 0 }));

vi.mock('../../src/engine/telemetry.js', async (importOriginal) => {
  const original = await importOriginal<typeof TelemetryModule>();
  return {
    ...original,
    openTelemetry: () => {
      loader.calls += 1;
      return original.loadOpenTelemetry(() => {
        throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), {
          code: 'MODULE_NOT_FOUND',
        });
      });
    },
  };
});

describe('telemetry without @opentelemetry/api', () => {
  let url: string;
  let telemetry: TestTelemetry;
  const res = testResources(() => url);

  beforeAll(async () => {
    telemetry = registerTestTelemetry();
    ({ url } = await sharedRedis());
  });

  afterEach(() => res.closeAll());

  afterAll(() => telemetry.shutdown());

  function lockClient(prefix: string): Promise<LockClient> {
    return res.lockClient({ keyPrefix: prefix });
  }

  // A second reader of a read lock gets straight in: it neither waits nor times out.
  it.each(KINDS.filter((kind) => kind.exclusive))(
    '$name: acquires, waits, times out, re-enters, releases and loses as usual',
    async (kind) => {
      const prefix = uniquePrefix('telemetry-absent');
      const callsBefore = loader.calls;
      const holder = await lockClient(prefix);
      const waiter = await lockClient(prefix);
      expect(loader.calls).toBe(callsBefore + 2);
      const lock = kind.handle(holder, 'invoice:42');
      const other = kind.handle(waiter, 'invoice:42');

      if (kind.reentrant) {
        await lock.withLock(async () => {
          const inner = await lock.acquire();
          expect(inner.holdCount).toBe(2);
          await inner.release();
        });
      }
      const lease = await lock.acquire();
      expect(lease.holdCount).toBe(1);
      await expect(other.acquire({ waitMs: 100 })).rejects.toBeInstanceOf(LockTimeoutError);
      expect(await other.tryAcquire()).toBeNull();
      const waiting = other.acquire({ waitMs: 5_000 });
      await lease.release();
      const next = await waiting;
      expect(await lock.tryAcquire()).toBeNull();
      await next.release();

      const unlocked = await lock.acquire();
      expect(await lock.forceUnlock()).toBe(true);
      expect((unlocked.signal.reason as LockLostError).reason).toBe('force-unlocked');
      await expect(unlocked.release()).rejects.toBeInstanceOf(LockNotOwnedError);
      const expiring = await lock.acquire({ leaseMs: 100 });
      await waitUntil('the short lease is lost', () => expiring.signal.aborted);
      expect((expiring.signal.reason as LockLostError).reason).toBe('expired');

      expect(telemetry.spans()).toEqual([]);
      const recorded = await telemetry.metrics();
      expect(
        recorded.filter((metric) => metric.dataPoints.length > 0).map((metric) => metric.descriptor.name),
      ).toEqual([]);
    },
  );
});
