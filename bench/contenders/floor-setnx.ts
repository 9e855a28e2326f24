// Floor: the least a correct single-instance lock can send, SET NX PX to take it and one
// compare-and-delete script (EVALSHA) to give it back. It cannot wait, so it only runs where
// nobody else holds the lock.
import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

export const COMPARE_AND_DELETE = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`;

const LEASE_MS = 30_000;

async function connect(options: SessionOptions): Promise<Session> {
  const redis = createClient({ url: options.url, name: options.name });
  redis.on('error', () => undefined);
  await redis.connect();
  const releaseSha = await redis.scriptLoad(COMPARE_AND_DELETE);
  const lease = String(options.leaseMs ?? LEASE_MS);
  return {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      const token = randomBytes(16).toString('hex');
      const reply: unknown = await redis.sendCommand(['SET', key, token, 'NX', 'PX', lease]);
      if (reply !== 'OK') throw new Error(`floor-setnx: ${key} is taken; a floor cannot wait`);
      return {
        release: async () => {
          await redis.sendCommand(['EVALSHA', releaseSha, '1', key, token]);
        },
      };
    },
    close(): Promise<void> {
      redis.destroy();
      return Promise.resolve();
    },
  };
}

export const floorSetnx: Adapter = {
  name: 'floor-setnx',
  caps: { wait: 'none', reentrant: false, renews: false, floor: true },
  connect,
};
