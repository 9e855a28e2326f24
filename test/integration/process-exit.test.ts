/**
 * A process must be able to exit when nothing of its own is pending: latchkey's subscriber
 * connection keeps it alive only while a waiter waits. And a Redis client closed before its
 * LockClient, while locks are held, is said out loud instead of leaving them locked silently.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ClientClosedError, LockClient, LockLostError } from '../../src/index.js';
import { waitQueueKey } from '../../src/keys.js';
import { connectClient, destroyClient } from '../support/clients.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis } from '../support/redis-server.js';
import { testResources } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { waitUntil } from '../support/wait.js';

const FIXTURE = new URL('../support/fixtures/forgot-close.ts', import.meta.url).pathname;
const WAITING_ALONE = new URL('../support/fixtures/waiting-alone.ts', import.meta.url).pathname;
/** Generous: the worker starts through tsx on a possibly busy machine. */
const EXIT_WITHIN_MS = 15_000;

describe('process exit and a closed Redis client', () => {
  const suite = sharedSuite('process-exit');

  for (const hold of [false, true]) {
    it(`a process that forgot locks.close() exits once its own client is closed${hold ? ', holding a lock' : ''}`, async () => {
      const prefix = uniquePrefix('forgot-close');
      const worker = suite.res.worker(FIXTURE, {
        REDIS_URL: suite.url,
        KEY_PREFIX: prefix,
        HOLD: hold ? '1' : '0',
      });
      await worker.next((message) => message['type'] === 'done', EXIT_WITHIN_MS);
      const exit = await Promise.race([
        worker.exited,
        new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 5_000)),
      ]);
      expect(exit).toEqual({ code: 0, signal: null });
      if (hold) {
        // Nobody released it: it stays locked until its lease ends, as the README says.
        const pttl = await suite.admin.pTTL(`${prefix}orders:still-held`);
        expect(pttl).toBeGreaterThan(0);
        await suite.admin.del(`${prefix}orders:still-held`);
      }
    }, 30_000);
  }

  it('a process whose only pending work is a waiting acquire stays alive until it gets the lock', async () => {
    const prefix = uniquePrefix('waiting-alone');
    const locks = new LockClient(suite.redis, { keyPrefix: prefix });
    try {
      const held = await locks.lock('exports:weekly').acquire();
      const waitingFile = join(mkdtempSync(join(tmpdir(), 'latchkey-waiting-')), 'queued');
      const worker = suite.res.worker(WAITING_ALONE, {
        REDIS_URL: suite.url,
        KEY_PREFIX: prefix,
        NAME: 'exports:weekly',
        WAITING_FILE: waitingFile,
      });
      // Queued in Redis: its attempt found the lock held while it listened on its channels.
      await waitUntil(
        'the waiter queued',
        async () => (await suite.admin.lLen(waitQueueKey(held.key))) === 1,
        EXIT_WITHIN_MS,
      );
      writeFileSync(waitingFile, '');
      await worker.next((message) => message['type'] === 'waiting', EXIT_WITHIN_MS);
      // Long enough for a process that nothing keeps alive to have exited.
      const early = await Promise.race([
        worker.exited,
        new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 1_500)),
      ]);
      expect(early).toBe('still running');
      await held.release();
      await worker.next((message) => message['type'] === 'acquired', 5_000);
      expect(await worker.exited).toEqual({ code: 0, signal: null });
    } finally {
      await locks.close();
    }
  }, 30_000);

  it("latchkey's own connection never crashes the process, even with no 'error' listener", async () => {
    // A server of its own: CLIENT KILL hits every subscriber of a server.
    const server = await startRedis();
    const own = testResources(() => server.url);
    const redis = await connectClient({ url: server.url });
    // No 'error' listener on the LockClient: its connection's errors must go nowhere harmful.
    const locks = new LockClient(redis, { keyPrefix: uniquePrefix('no-listener') });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('uncaughtException', onUnhandled);
    process.on('unhandledRejection', onUnhandled);
    try {
      const admin = await own.connect();
      const held = await locks.lock('reports:daily').acquire();
      const channel = `redisson_lock__channel:{${held.key}}`;
      const waiting = locks.lock('reports:daily').acquire({ waitMs: 10_000 });
      await waitUntil('the waiter subscribed', async () => (await own.numsub(channel)) === 1);
      // Kills latchkey's subscriber connection: the library reconnects it and reports the error
      // as an 'error' event, which nobody listens to here.
      await admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']);
      await waitUntil('the waiter subscribed again', async () => (await own.numsub(channel)) === 1, 5_000);
      await held.release();
      await (await waiting).release();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('uncaughtException', onUnhandled);
      process.off('unhandledRejection', onUnhandled);
      await locks.close();
      destroyClient(redis);
      await own.closeAll();
      await server.stop();
    }
  });

  it('says so, and gives the holds up, when the Redis client is closed before the LockClient', async () => {
    const redis = await connectClient({ url: suite.url });
    const locks = new LockClient(redis, { keyPrefix: uniquePrefix('closed-first'), watchdogTimeoutMs: 300 });
    const errors: Error[] = [];
    locks.on('error', (error) => errors.push(error));
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => {
      if ((warning as Error & { code?: string }).code === 'LATCHKEY_CLIENT_CLOSED') warnings.push(warning);
    };
    process.on('warning', onWarning);
    try {
      const lease = await locks.lock('payroll:run').acquire();
      destroyClient(redis);
      await waitUntil('the holder is told', () => lease.signal.aborted, 2_000);
      expect(lease.signal.reason).toBeInstanceOf(LockLostError);
      expect((lease.signal.reason as LockLostError).reason).toBe('client-closed');
      expect(errors).toHaveLength(1);
      expect(errors[0]).toBeInstanceOf(ClientClosedError);
      expect(errors[0]?.message).toMatch(
        /"payroll:run".*stay locked in Redis until their leases end.*Close the LockClient first/s,
      );
      await waitUntil('the process warning is out', () => warnings.length === 1, 1_000);
    } finally {
      process.off('warning', onWarning);
      await locks.close();
    }
  });
});
