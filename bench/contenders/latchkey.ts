// latchkey: one node-redis client and one LockClient per session; each acquire outside a
// withLock context is its own owner, so contenders sharing a session still exclude each other.
import { createClient } from 'redis';
import { latchkey as built } from '../latchkey-package.js';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

const { LockClient } = built;

async function connect(options: SessionOptions): Promise<Session> {
  const redis = createClient({ url: options.url, name: options.name });
  redis.on('error', () => undefined);
  await redis.connect();
  const locks = new LockClient(
    redis,
    options.leaseMs === undefined ? undefined : { watchdogTimeoutMs: options.leaseMs },
  );
  locks.on('error', () => undefined);
  let lost = 0;
  locks.on('lockLost', () => {
    lost += 1;
  });
  return {
    giveUps: 0,
    get locksLost(): number {
      return lost;
    },
    async acquire(key: string): Promise<Held> {
      const lease = await locks.lock(key).acquire();
      return { release: () => lease.release(), redisKey: lease.key };
    },
    async withReentry(key, body): Promise<void> {
      const lock = locks.lock(key);
      await lock.withLock(async () => {
        await body(async () => {
          const inner = await lock.acquire();
          return { release: () => inner.release() };
        });
      });
    },
    async close(): Promise<void> {
      await locks.close();
      redis.destroy();
    },
  };
}

export const latchkey: Adapter = {
  name: 'latchkey',
  caps: { wait: 'pubsub', reentrant: true, renews: true, floor: false },
  // The watchdog renews every third of its timeout (default 30 s).
  renewIntervalMs: (leaseMs) => Math.max(10, Math.floor((leaseMs ?? 30_000) / 3)),
  connect,
};
