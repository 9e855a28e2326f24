/**
 * What a user sees while Redis is down: errors that name the cause in round numbers, calls that
 * end by their bounds, and a LockClient that says nothing more once close() has resolved.
 */
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
