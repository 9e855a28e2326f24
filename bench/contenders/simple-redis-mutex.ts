// simple-redis-mutex over node-redis, at its defaults (30 s lease, a poll every 10 s as a safety
// net, waiters woken through one shared pub/sub channel for all locks).
import { createClient } from 'redis';
import { lock } from 'simple-redis-mutex';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

async function connect(options: SessionOptions): Promise<Session> {
  const redis = createClient({ url: options.url, name: options.name });
  redis.on('error', () => undefined);
  await redis.connect();
  const lockOptions = options.leaseMs === undefined ? undefined : { timeout: options.leaseMs };
  return {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      const release = await lock(redis, key, lockOptions);
      return { release: () => release() };
    },
    async close(): Promise<void> {
      // Its shared subscriber closes itself when this client ends.
      await redis.close();
    },
  };
}

export const simpleRedisMutex: Adapter = {
  name: 'simple-redis-mutex',
  caps: { wait: 'pubsub', reentrant: false, renews: false, floor: false },
  connect,
};
