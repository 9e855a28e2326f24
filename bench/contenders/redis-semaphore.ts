// redis-semaphore's Mutex over ioredis, at its defaults: polls SET NX every 10 ms, gives up
// after 10 s (the adapter then asks again and counts a give-up), refreshes every 0.8 x lease.
import { Redis } from 'ioredis';
import { Mutex, TimeoutError } from 'redis-semaphore';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

async function connect(options: SessionOptions): Promise<Session> {
  const url = new URL(options.url);
  const redis = new Redis({
    host: url.hostname,
    port: Number(url.port),
    connectionName: options.name,
    lazyConnect: true,
  });
  redis.on('error', () => undefined);
  await redis.connect();
  const lockOptions = options.leaseMs === undefined ? undefined : { lockTimeout: options.leaseMs };
  const session = {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      const mutex = new Mutex(redis, key, lockOptions);
      for (;;) {
        try {
          await mutex.acquire();
          return { release: () => mutex.release() };
        } catch (error) {
          if (!(error instanceof TimeoutError)) throw error;
          session.giveUps += 1;
        }
      }
    },
    close(): Promise<void> {
      redis.disconnect();
      return Promise.resolve();
    },
  };
  return session;
}

export const redisSemaphore: Adapter = {
  name: 'redis-semaphore',
  caps: { wait: 'polling', reentrant: false, renews: true, floor: false },
  renewIntervalMs: (leaseMs) => Math.round((leaseMs ?? 10_000) * 0.8),
  connect,
};
