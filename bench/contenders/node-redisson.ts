// node-redisson: a Redisson instance (two ioredis connections) per session. Ownership belongs
// to the RLock object (a random client id per getLock), not to an async context, so each
// acquire takes a fresh RLock and a re-entry calls lock() again on the same object.
import { Redisson } from 'node-redisson';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

async function connect(options: SessionOptions): Promise<Session> {
  const url = new URL(options.url);
  const redisson = new Redisson({
    redis: {
      options: { host: url.hostname, port: Number(url.port), connectionName: options.name },
    },
    ...(options.leaseMs === undefined ? {} : { lockWatchdogTimeout: BigInt(options.leaseMs) }),
  });
  redisson.redis.on('error', () => undefined);
  // Both connections connect on construction; a PING each makes sure they are up.
  await redisson.redis.ping();
  return {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      const lock = redisson.getLock(key);
      await lock.lock();
      return { release: () => lock.unlock() };
    },
    async withReentry(key, body): Promise<void> {
      const lock = redisson.getLock(key);
      await lock.lock();
      try {
        await body(async () => {
          await lock.lock();
          return { release: () => lock.unlock() };
        });
      } finally {
        await lock.unlock();
      }
    },
    async close(): Promise<void> {
      await redisson.quit();
    },
  };
}

export const nodeRedisson: Adapter = {
  name: 'node-redisson',
  caps: { wait: 'pubsub', reentrant: true, renews: true, floor: false },
  // Its watchdog renews each held lock every third of lockWatchdogTimeout (default 30 s).
  renewIntervalMs: (leaseMs) => Math.floor((leaseMs ?? 30_000) / 3),
  connect,
};
