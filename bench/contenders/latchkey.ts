// latchkey: one node-redis client and one LockClient per session; each acquire outside a
// withLock context is its own owner, so contenders sharing a session still exclude each other.
// The same session on the other clients latchkey takes is in latchkey-clients.ts.
import { createClient } from 'redis';
import type { LockRedisClient } from 'latchkey';
import { latchkey as built } from '../latchkey-package.js';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

const { LockClient } = built;

/**
 * A session of latchkey's reentrant lock on `redis`, a connected client of any library latchkey
 * takes; `destroy` closes that client once the LockClient is closed.
 */
export function latchkeySession(
  redis: LockRedisClient,
  destroy: () => void,
  options: SessionOptions,
): Session {
  const locks = new LockClient(
    redis,
    options.leaseMs === undefined ? undefined : { watchdogTimeoutMs: options.leaseMs },
  );
  locks.on('error', () => undefined);
  let lost = 0;
  locks.on('lockLost', () => {
    lost += 1;
  });
  // The other kinds' waits, for the many-keys heap of a waiter per kind: a semaphore of one
  // permit (its holder takes it, its waiter waits for it) and a latch of count 1 (its holder
  // sets it and counts it down on release; its waiter awaits it).
  const takePermit = async (key: string): Promise<Held> => {
    const semaphore = locks.semaphore(key, { permits: 1 });
    await semaphore.acquire();
    return { release: () => semaphore.release() };
  };
  const waiterKinds: Session['waiterKinds'] = {
    semaphore: { hold: takePermit, wait: takePermit },
    latch: {
      async hold(key) {
        const latch = locks.countDownLatch(key);
        await latch.trySetCount(1);
        return { release: async () => void (await latch.countDown()) };
      },
      wait: (key) => locks.countDownLatch(key).await(),
    },
  };
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
    waiterKinds,
    async close(): Promise<void> {
      await locks.close();
      destroy();
    },
  };
}

async function connect(options: SessionOptions): Promise<Session> {
  const redis = createClient({ url: options.url, name: options.name });
  redis.on('error', () => undefined);
  await redis.connect();
  return latchkeySession(redis, () => redis.destroy(), options);
}

/** The watchdog renews every third of its timeout (default 30 s). */
export const latchkeyRenewIntervalMs = (leaseMs: number | undefined): number =>
  Math.max(10, Math.floor((leaseMs ?? 30_000) / 3));

export const latchkey: Adapter = {
  name: 'latchkey',
  caps: { wait: 'pubsub', reentrant: true, renews: true, floor: false },
  renewIntervalMs: latchkeyRenewIntervalMs,
  connect,
};
