/**
 * What a user sees while Redis is down: errors that name the cause in round numbers and say how
 * long the call waited, calls that end by their bounds (on a client that never reached Redis too),
 * and a LockClient that says nothing more once close() has resolved.
 */
import { createServer } from 'node:net';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockError } from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources } from '../support/resources.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

const COMMAND_TIMEOUT_MS = 300;

describe('while Redis is down', () => {
  let server: RedisInstance;
  const res = testResources(() => server.url);
  let locks: LockClient;
  const emitted: string[] = [];

  beforeAll(async () => {
    server = await startRedis();
    const redis = await res.connect();
    locks = new LockClient(redis, {
      keyPrefix: uniquePrefix('redis-down'),
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
      watchdogTimeoutMs: 600,
    });
    for (const event of ['acquired', 'released', 'lockLost', 'renewFailed', 'error'] as const) {
      locks.on(event, () => emitted.push(event));
    }
    await server.kill();
    // The client has noticed, and is reconnecting: calls now wait for a connection.
    await waitUntil('the client knows the server is gone', () => !redis.isReady);
  });

  afterAll(async () => {
    await locks.close();
    await res.closeAll();
    await server.stop();
  });

  it('tryAcquire() says that the connection is down, in whole milliseconds', async () => {
    const outcome = await settle(locks.lock('invoice:1').tryAcquire());
    expect(outcome.error).toBeInstanceOf(LockError);
    const message = (outcome.error as LockError).message;
    expect(message).toMatch(/did not answer within \d+ ms: the connection to Redis is down/);
    expect(message).not.toMatch(/\d+\.\d+ ms/);
    expect((outcome.error as LockError).code).toBe('REDIS_ERROR');
  });

  it('acquire() ends by waitMs plus the command timeout, with the same cause and no bare abort', async () => {
    const startedAt = performance.now();
    const outcome = await settle(locks.lock('invoice:2').acquire({ waitMs: 400 }));
    expect(outcome.at - startedAt).toBeLessThan(400 + COMMAND_TIMEOUT_MS + 250);
    const message = (outcome.error as Error).message;
    expect(message).toMatch(/the connection to Redis is down/);
    expect(message).not.toMatch(/aborted/i);
  });

  it('emits nothing once close() has resolved, whatever was under way', async () => {
    // Calls in flight and in retry when the client closes.
    const pending = [locks.lock('invoice:3').acquire(), locks.simpleLock('invoice:4').acquire()].map(settle);
    await sleep(50);
    await locks.close();
    const atClose = emitted.length;
    await Promise.all(pending);
    await sleep(COMMAND_TIMEOUT_MS * 3);
    expect(emitted.slice(atClose)).toEqual([]);
  });
});

/** A loopback port nothing listens on: connections to it are refused. */
async function refusingPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('on a client that never reached Redis', () => {
  const WAIT_MS = 300;
  const TIMEOUT_MS = 700;
  /** Scheduling delay on a busy machine: the bound is waitMs + commandTimeoutMs, plus this. */
  const LATE_MS = 400;
  let redis: ReturnType<typeof createClient>;
  let locks: LockClient;

  beforeAll(async () => {
    // Created and told to connect, its server refusing: node-redis keeps reconnecting.
    redis = createClient({ url: `redis://127.0.0.1:${await refusingPort()}` });
    redis.on('error', () => undefined);
    redis.connect().catch(() => undefined);
    locks = new LockClient(redis, { keyPrefix: uniquePrefix('never-up'), commandTimeoutMs: TIMEOUT_MS });
    locks.on('error', () => undefined);
  });

  afterAll(async () => {
    await locks.close();
    redis.destroy();
  });

  /** The time a rejection says it waited: `… after <n> ms: …`. */
  function statedMs(error: unknown): number {
    const stated = /after (\d+) ms: /.exec((error as Error).message)?.[1];
    if (stated === undefined) throw new Error(`no time waited in: ${(error as Error).message}`);
    return Number(stated);
  }

  it.each([
    ['lock', (): Promise<unknown> => locks.lock('invoice:5').acquire({ waitMs: WAIT_MS })],
    ['latch', (): Promise<unknown> => locks.countDownLatch('batch:5').await({ waitMs: WAIT_MS })],
  ])(
    'a %s wait with waitMs rejects by waitMs + commandTimeoutMs, saying how long it waited',
    async (_, wait) => {
      const startedAt = performance.now();
      const outcome = await settle(wait());
      const elapsedMs = outcome.at - startedAt;
      expect(outcome.error).toBeInstanceOf(LockError);
      expect((outcome.error as LockError).code).toBe('REDIS_ERROR');
      expect(elapsedMs).toBeLessThan(WAIT_MS + TIMEOUT_MS + LATE_MS);
      // The time it states is the call's own, not only its last try's.
      const stated = statedMs(outcome.error);
      expect(stated).toBeGreaterThanOrEqual(WAIT_MS);
      expect(stated).toBeLessThanOrEqual(Math.ceil(elapsedMs));
      expect(stated).toBeGreaterThan(elapsedMs - 50);
      expect((outcome.error as Error).message).toMatch(/the connection to Redis is down/);
    },
  );
});
