// latchkey's other kinds, each driven as a mutex so every scenario's mutual-exclusion check
// applies: the fenced and simple locks, the fair lock, a read-write lock's write lock, and the
// semaphore and permit semaphore (one permit, or the session's `permits`). One node-redis client
// and one LockClient per session, as for the reentrant lock.
import { createClient } from 'redis';
import type { LockClient as LockClientType } from 'latchkey';
import { latchkey as built } from '../latchkey-package.js';
import type { Adapter, ContenderName, Held, Session, SessionOptions } from './types.js';

const { LockClient } = built;

type Take = (locks: LockClientType, key: string, options: SessionOptions) => Promise<Held>;

function kindAdapter(name: ContenderName, kind: string, take: Take, permits = false): Adapter {
  return {
    name,
    caps: { wait: 'pubsub', reentrant: false, renews: true, floor: false, kind, permits },
    renewIntervalMs: (leaseMs) => Math.max(10, Math.floor((leaseMs ?? 30_000) / 3)),
    async connect(options: SessionOptions): Promise<Session> {
      const redis = createClient({ url: options.url, name: options.name });
      redis.on('error', () => undefined);
      await redis.connect();
      const locks = new LockClient(
        redis,
        options.leaseMs === undefined ? undefined : { watchdogTimeoutMs: options.leaseMs },
      );
      locks.on('error', () => undefined);
      return {
        giveUps: 0,
        acquire: (key) => take(locks, key, options),
        async close(): Promise<void> {
          await locks.close();
          redis.destroy();
        },
      };
    },
  };
}

function leased(lease: { release(): Promise<void> }): Held {
  return { release: () => lease.release() };
}

export const latchkeyFenced = kindAdapter('latchkey-fenced', 'fenced lock', async (locks, key) =>
  leased(await locks.fencedLock(key).acquire()),
);

export const latchkeySimple = kindAdapter('latchkey-simple', 'simple lock', async (locks, key) =>
  leased(await locks.simpleLock(key).acquire()),
);

export const latchkeyFair = kindAdapter('latchkey-fair', 'fair lock', async (locks, key) =>
  leased(await locks.fairLock(key).acquire()),
);

export const latchkeyReadWrite = kindAdapter('latchkey-rw', 'read-write lock (write)', async (locks, key) =>
  leased(await locks.readWriteLock(key).writeLock().acquire()),
);

export const latchkeySemaphore = kindAdapter(
  'latchkey-semaphore',
  'semaphore',
  async (locks, key, options) => {
    const semaphore = locks.semaphore(key, { permits: options.permits ?? 1 });
    await semaphore.acquire();
    return { release: () => semaphore.release() };
  },
  true,
);

export const latchkeyPermits = kindAdapter(
  'latchkey-permits',
  'permit semaphore',
  async (locks, key, options) =>
    leased(await locks.permitSemaphore(key, { permits: options.permits ?? 1 }).acquire()),
  true,
);
