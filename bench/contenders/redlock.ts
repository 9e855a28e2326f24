// redlock 4 over ioredis, at its defaults (retryCount 10, retryDelay 200 ms, retryJitter 100 ms
// in its code). After its last retry it rejects; the adapter then asks again and counts that
// as a give-up, so contended numbers include the library's own give-up cost.
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

interface RedlockLock {
  unlock(): Promise<void>;
}

interface RedlockInstance {
  lock(resource: string, ttlMs: number): Promise<RedlockLock>;
  on(event: 'clientError', listener: (error: unknown) => void): void;
}

interface RedlockConstructor {
  new (clients: Redis[], options?: Record<string, number>): RedlockInstance;
  LockError: new (...args: never[]) => Error;
}

// redlock 4 ships CommonJS without type declarations.
const Redlock = createRequire(import.meta.url)('redlock') as RedlockConstructor;

/** redlock has no renewal: the lease must outlast any hold in these scenarios. */
const LEASE_MS = 10_000;

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
  const redlock = new Redlock([redis]);
  redlock.on('clientError', () => undefined);
  const ttl = options.leaseMs ?? LEASE_MS;
  const session = {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      for (;;) {
        try {
          const lock = await redlock.lock(key, ttl);
          return { release: () => lock.unlock() };
        } catch (error) {
          if (!(error instanceof Redlock.LockError)) throw error;
          session.giveUps += 1;
        }
      }
    },
    async close(): Promise<void> {
      redis.disconnect();
      return Promise.resolve();
    },
  };
  return session;
}

export const redlock: Adapter = {
  name: 'redlock',
  caps: { wait: 'polling', reentrant: false, renews: false, floor: false },
  connect,
};
