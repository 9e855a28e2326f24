// @sesamecare-oss/redlock (node-redlock rewritten in TypeScript for ioredis 5) over ioredis, the
// only client it takes, at its defaults (retryCount 10, retryDelay 200 ms, retryJitter 100 ms in its
// code). After its last retry acquire() rejects with an ExecutionError; the adapter then asks
// again and counts that as a give-up, as for redlock.
import { ExecutionError, Redlock } from '@sesamecare-oss/redlock';
import { Redis } from 'ioredis';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

/** Renewal is only in its using() helper; plain acquire() holds need a lease that outlasts them. */
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
  // It emits 'error' on every attempt that finds the lock taken; unheard, that would throw.
  redlock.on('error', () => undefined);
  const ttl = options.leaseMs ?? LEASE_MS;
  const session = {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      for (;;) {
        try {
          const lock = await redlock.acquire([key], ttl);
          return {
            release: async () => {
              await lock.release();
            },
          };
        } catch (error) {
          if (!(error instanceof ExecutionError)) throw error;
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

export const sesameRedlock: Adapter = {
  name: 'sesame-redlock',
  caps: { wait: 'polling', reentrant: false, renews: false, floor: false },
  connect,
};
