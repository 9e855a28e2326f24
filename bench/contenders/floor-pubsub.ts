// Floor of a pub/sub hand-off: the releasing process sends one EVALSHA whose script hands the
// lock to the queued waiter and PUBLISHes its token; the waiter, in another process, is done
// when the message arrives on its subscriber connection. A waiter woken by pub/sub cannot get
// the lock in less (one script call, one message), so latchkey's handoff is held against this.
// It takes a free lock with the same script (SET NX, or queue the token when taken), so it also
// guards the hand-off it measures. A session subscribes to a lock's grant channel only when its
// attempt found the lock taken, and keeps the subscription: the first wait on a channel then
// reads the lock once the subscription is confirmed (it may have been granted before anyone
// listened); later waits find the channel subscribed and only wait for the message. So a held
// lock is one key, and a waiter one queued token, one subscribed channel and one pending
// promise: the manyKeys scenario measures it as the floor of the client heap per held lock with
// a waiter (what the harness and node-redis keep alone). It has no timeout, renewal or cleanup
// of a waiter that left, and runs in the handoff and manyKeys scenarios only.
import { randomBytes } from 'node:crypto';
import { connectFloorClients } from './floor-clients.js';
import type { Adapter, Held, Session, SessionOptions } from './types.js';

/** KEYS: the lock, its queue of waiting tokens. ARGV: token, lease in ms. 1 taken, 0 queued. */
const TAKE_OR_QUEUE = `if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
redis.call('rpush', KEYS[2], ARGV[1])
return 0`;

/**
 * KEYS: the lock, its queue. ARGV: token, lease in ms, channel. Gives the lock to the first
 * queued token and publishes that token, or deletes it when nobody waits; 0 if not the owner.
 */
const RELEASE_AND_PUBLISH = `if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
local next = redis.call('lpop', KEYS[2])
if next then
  redis.call('set', KEYS[1], next, 'PX', ARGV[2])
  redis.call('publish', ARGV[3], next)
else
  redis.call('del', KEYS[1])
end
return 1`;

const LEASE_MS = 30_000;

async function connect(options: SessionOptions): Promise<Session> {
  const clients = await connectFloorClients(options.url, options.name);
  const { redis, subscriber } = clients;
  const takeSha = await redis.scriptLoad(TAKE_OR_QUEUE);
  const releaseSha = await redis.scriptLoad(RELEASE_AND_PUBLISH);
  const lease = String(options.leaseMs ?? LEASE_MS);
  /** Waiters of this session by token, resolved by the message that names them. */
  const granted = new Map<string, () => void>();
  /** Channels whose subscription is confirmed: a grant on them reaches `onMessage`. */
  const subscribed = new Set<string>();
  /** Subscriptions asked for and not yet confirmed, shared by the waits that need them. */
  const subscribing = new Map<string, Promise<void>>();
  const onMessage = (token: string): void => {
    const resolve = granted.get(token);
    granted.delete(token);
    resolve?.();
  };

  /**
   * Waits on a channel not yet subscribed to: subscribes (or joins a subscription under way),
   * then reads the lock, since the grant may have come before the subscription was confirmed;
   * the message resolves `token` otherwise.
   */
  const listen = async (key: string, channel: string, token: string): Promise<void> => {
    let ready = subscribing.get(channel);
    if (ready === undefined) {
      ready = subscriber
        .subscribe(channel, onMessage)
        .then(() => void subscribed.add(channel))
        .finally(() => subscribing.delete(channel));
      subscribing.set(channel, ready);
    }
    await ready;
    if ((await redis.get(key)) === token) onMessage(token);
  };

  const hold = (key: string, token: string): Held => ({
    redisKey: key,
    release: async () => {
      await redis.sendCommand([
        'EVALSHA',
        releaseSha,
        '2',
        key,
        `${key}:queue`,
        token,
        lease,
        `${key}:granted`,
      ]);
    },
  });

  return {
    giveUps: 0,
    async acquire(key: string): Promise<Held> {
      const token = randomBytes(16).toString('hex');
      // Registered before the attempt: on a channel already subscribed, the grant's message may
      // arrive before the script's reply.
      const grant = new Promise<void>((resolve) => granted.set(token, resolve));
      const reply: unknown = await redis.sendCommand([
        'EVALSHA',
        takeSha,
        '2',
        key,
        `${key}:queue`,
        token,
        lease,
      ]);
      if (reply === 1) {
        granted.delete(token);
      } else {
        // Queued: the releasing owner hands the lock over and publishes the token.
        const channel = `${key}:granted`;
        if (!subscribed.has(channel)) await listen(key, channel, token);
        await grant;
      }
      return hold(key, token);
    },
    close: clients.close,
  };
}

export const floorPubsub: Adapter = {
  name: 'floor-pubsub',
  caps: {
    wait: 'pubsub',
    reentrant: false,
    renews: false,
    floor: true,
    // The manyKeys points with a waiter on each lock (the heap floor); 100,000 is latchkey's only.
    scenarios: ['handoff', 'handoff-paired', 'manyKeys-1000', 'manyKeys-10000'],
  },
  connect,
};
