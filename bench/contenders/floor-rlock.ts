// Floor of latchkey's own protocol: its lock scripts (lock/acquire.lua, and lock/release.lua with
// the hand-over), on its key layout and queue entries, sent by the least client that can use
// them. One script call takes or queues, one releases; a queued waiter is done when the grant
// names its ticket on the session's grant channel, subscribed once at connect. It keeps no hold
// counts, renews nothing, sets no timeouts, retries nothing and never gives up a wait, so it
// runs only where a waiter is always handed the lock (the uncontended cycle and the hand-off).
// Against floor-2evalsha and floor-pubsub it shows what the protocol costs in Redis; latchkey
// against it shows what latchkey's client adds.
import { randomBytes } from 'node:crypto';
import {
  grantChannel,
  ownerField,
  queueMember,
  requestKey,
  foreignKey,
  unlockChannel,
  waitQueueKey,
} from '../../src/keys.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { connectFloorClients } from './floor-clients.js';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

const LEASE_MS = 30_000;
/**
 * How long a queue entry outlives its lease: latchkey's engine gives its entries 60 s more. The
 * scripts take it as an argument; the floor keeps its own copy rather than reach into the
 * engine, whose modules are latchkey's to rearrange.
 */
const QUEUE_TTL_MS = 60_000;

async function connect(options: SessionOptions): Promise<Session> {
  const clients = await connectFloorClients(options.url, options.name);
  const { redis, subscriber } = clients;
  const acquireSha = await redis.scriptLoad(luaScripts['lock/acquire'].source);
  const releaseSha = await redis.scriptLoad(luaScripts['lock/release'].source);
  const clientId = randomBytes(16).toString('hex');
  const grants = grantChannel(randomBytes(8).toString('hex'));
  const leaseMs = options.leaseMs ?? LEASE_MS;
  const lease = String(leaseMs);
  const queueTtl = String(leaseMs + QUEUE_TTL_MS);
  let counter = 0;
  /** Waiters of this session by ticket, resolved by the grant that names them. */
  const waiting = new Map<string, () => void>();
  await subscriber.subscribe(grants, (ticket) => {
    const resolve = waiting.get(ticket);
    waiting.delete(ticket);
    resolve?.();
  });

  const hold = (key: string, owner: string): Held => ({
    redisKey: key,
    release: async () => {
      const reply: unknown = await redis.sendCommand([
        'EVALSHA',
        releaseSha,
        '3',
        key,
        waitQueueKey(key),
        foreignKey(key),
        unlockChannel(key),
        lease,
        owner,
        '1',
      ]);
      if (reply !== 1) throw new Error(`floor-rlock: release of ${key} answered ${JSON.stringify(reply)}`);
    },
  });

  return {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      counter += 1;
      const id = `${clientId.slice(0, 12)}${counter.toString(36)}`;
      const owner = ownerField(clientId, counter.toString(36));
      const ticket = `t${id}`;
      // Registered before the call: the grant may arrive before the script's reply.
      const granted = new Promise<void>((resolve) => waiting.set(ticket, resolve));
      const reply: unknown = await redis.sendCommand([
        'EVALSHA',
        acquireSha,
        '4',
        key,
        requestKey(key, id),
        waitQueueKey(key),
        foreignKey(key),
        lease,
        owner,
        '0',
        queueMember(ticket, leaseMs, grants, owner),
        '',
        queueTtl,
        '0',
      ]);
      if (reply === null) {
        waiting.delete(ticket);
      } else if (Array.isArray(reply)) {
        await granted;
      } else {
        throw new Error(`floor-rlock: acquire of ${key} answered ${JSON.stringify(reply)}`);
      }
      return hold(key, owner);
    },
    close: clients.close,
  };
}

export const floorRlock: Adapter = {
  name: 'floor-rlock',
  caps: {
    wait: 'pubsub',
    reentrant: false,
    renews: false,
    floor: true,
    scenarios: ['uncontended', 'uncontended-distinct', 'handoff', 'handoff-paired'],
  },
  connect,
};
