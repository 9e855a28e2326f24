// Floor: two plain EVALSHA calls per cycle with minimal bodies, the cost any script-based lock
// pays at least; latchkey's uncontended cycle is held against this one.
import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import { COMPARE_AND_DELETE } from './floor-setnx.js';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

const TAKE_IF_FREE = `return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`;
const LEASE_MS = 30_000;

async function connect(options: SessionOptions): Promise<Session> {
  const redis = createClient({ url: options.url, name: options.name });
  redis.on('error', () => undefined);
  await redis.connect();
  const takeSha = await redis.scriptLoad(TAKE_IF_FREE);
  const releaseSha = await redis.scriptLoad(COMPARE_AND_DELETE);
  const lease = String(options.leaseMs ?? LEASE_MS);
  return {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      const token = randomBytes(16).toString('hex');
      const reply: unknown = await redis.sendCommand(['EVALSHA', takeSha, '1', key, token, lease]);
      if (reply !== 'OK') throw new Error(`floor-2evalsha: ${key} is taken; a floor cannot wait`);
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

export const floor2Evalsha: Adapter = {
  name: 'floor-2evalsha',
  caps: { wait: 'none', reentrant: false, renews: false, floor: true },
  connect,
};
