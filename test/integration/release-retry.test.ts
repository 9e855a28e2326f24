/**
 * A last release that Redis never confirmed (the server was unreachable for the whole lease)
 * rejects with REDIS_ERROR and may be called again: the second call sends the same request,
 * so it learns what the first one did instead of answering "not the owner".
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockError } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { settle, sleep } from '../support/wait.js';

describe('a last release that Redis could not confirm', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  beforeAll(async () => {
    server = await startRedis();
    admin = await perFile.connect();
    // A request held up by the pause must run as sent, not fail with NOSCRIPT.
    for (const script of Object.values(luaScripts)) {
      await admin.sendCommand(['SCRIPT', 'LOAD', script.source]);
    }
  });

  afterEach(() => res.closeAll());

  afterAll(async () => {
    await perFile.closeAll();
    await server.stop();
  });

  it('rejects with REDIS_ERROR, and a second release() reports what the first one did', async () => {
    const keyPrefix = uniquePrefix('release-retry');
    // A last release is retried for twice the command timeout, at least 1 s.
    const locks = await res.lockClient({ keyPrefix, commandTimeoutMs: 100 });
    // The 30 s watchdog lease outlives the pause: the lock is still there when Redis is back.
    const lease = await locks.lock('invoice:77').acquire();
    const key = lease.key;

    await server.pause();
    let first: Awaited<ReturnType<typeof settle<void>>>;
    try {
      first = await settle(lease.release());
    } finally {
      await server.resume();
    }
    expect(first.error).toBeInstanceOf(LockError);
    expect((first.error as LockError).code).toBe('REDIS_ERROR');
    expect(lease.released).toBe(false);

    // On resume the buffered release runs: the lock is deleted and the request recorded.
    await sleep(100);
    expect(await admin.exists(key)).toBe(0);

    // Asked again, the same request is sent: its record says "released", not "not the owner".
    await expect(lease.release()).resolves.toBeUndefined();
    expect(lease.released).toBe(true);
    expect(lease.signal.aborted).toBe(false);
  });
});
