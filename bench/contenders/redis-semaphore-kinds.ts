// redis-semaphore's Semaphore and MultiSemaphore over ioredis, at their defaults (poll every
// 10 ms, give up after 10 s — the adapter then asks again and counts a give-up — refresh every
// 0.8 x lease): the closest peers of latchkey's semaphores. `permits` from the session is the
// limit; each acquisition takes one.
import { Redis } from 'ioredis';
import { MultiSemaphore, Semaphore, TimeoutError } from 'redis-semaphore';
import type { Adapter, ContenderName, Held, Session, SessionOptions } from './types.js';

interface PeerLock {
  acquire(): Promise<unknown>;
  release(): Promise<unknown>;
}

function peerAdapter(
  name: ContenderName,
  kind: string,
  make: (redis: Redis, key: string, limit: number, options: { lockTimeout: number } | undefined) => PeerLock,
): Adapter {
  return {
    name,
    caps: { wait: 'polling', reentrant: false, renews: true, floor: false, kind, permits: true },
    renewIntervalMs: (leaseMs) => Math.round((leaseMs ?? 10_000) * 0.8),
    async connect(options: SessionOptions): Promise<Session> {
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
      const limit = options.permits ?? 1;
      const session = {
        giveUps: 0,
        async acquire(key: string): Promise<Held> {
          const lock = make(redis, key, limit, lockOptions);
          for (;;) {
            try {
              await lock.acquire();
              return { release: async () => void (await lock.release()) };
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
    },
  };
}

export const rsSemaphore = peerAdapter(
  'rs-semaphore',
  'semaphore (redis-semaphore)',
  (redis, key, limit, options) => new Semaphore(redis, key, limit, options),
);

export const rsMultiSemaphore = peerAdapter(
  'rs-multisemaphore',
  'multi-semaphore (redis-semaphore)',
  (redis, key, limit, options) => new MultiSemaphore(redis, key, limit, 1, options),
);
