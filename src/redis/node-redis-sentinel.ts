import type {
  MessageListener,
  NodeRedisSentinelClient,
  RedisConnection,
  Subscriber,
  SubscriberEvents,
} from './connection.js';

/** A promise settled from outside; settling it again does nothing. */
function settable(): {
  readonly promise: Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
} {
  let resolve!: (value: unknown) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<unknown>((res, rej) => {
    resolve = res;
    reject = (error: unknown) => rej(error instanceof Error ? error : new Error(String(error)));
  });
  return { promise, resolve, reject };
}

/** A listener subscribed as a string listener: node-redis gives it strings only. */
type StringOrBufferListener = (message: string | Buffer, channel: string | Buffer) => void;

type Candidate = Partial<Record<'sendCommand' | 'getMasterNode' | 'use' | 'subscribe' | 'on', unknown>>;

/**
 * Whether `redis` looks like a node-redis `createSentinel()` client: commands, a master it
 * follows, exclusive use of one master connection, and pub/sub of its own. Sends nothing.
 * @internal
 */
export function isNodeRedisSentinel(redis: unknown): redis is NodeRedisSentinelClient {
  if (typeof redis !== 'object' || redis === null) return false;
  const candidate = redis as Candidate;
  return (
    typeof candidate.sendCommand === 'function' &&
    typeof candidate.getMasterNode === 'function' &&
    typeof candidate.use === 'function' &&
    typeof candidate.subscribe === 'function' &&
    typeof candidate.on === 'function'
  );
}

/**
 * The connection to Redis through a node-redis Sentinel client, which finds the master through
 * the sentinels and moves its connections (pub/sub included) to the new master after a failover.
 * Commands go to the master (`isReadonly` false: never to a replica).
 * @internal
 */
export class NodeRedisSentinelConnection implements RedisConnection {
  readonly library = 'node-redis-sentinel';
  readonly #client: NodeRedisSentinelClient;

  constructor(client: NodeRedisSentinelClient) {
    this.#client = client;
  }

  get closed(): boolean {
    return this.#client.isOpen === false;
  }

  /**
   * Never: a command may wait in the client for a master connection (in a pool, or while the
   * sentinels elect a new master), so each one is sent with a signal that can withdraw it.
   */
  get sendsAtOnce(): boolean {
    return false;
  }

  get connected(): boolean {
    return this.#client.isReady === true;
  }

  send(args: string[], signal?: AbortSignal): Promise<unknown> {
    return signal === undefined
      ? this.#client.sendCommand(false, args)
      : this.#client.sendCommand(false, args, { abortSignal: signal });
  }

  /**
   * Both commands on one master connection leased for them alone: `sendCommand` may spread
   * commands over the client's pool of master connections (`masterPoolSize`), and a WAIT counts
   * only the writes of its own connection.
   */
  sendPair(first: string[], second: string[], signal?: AbortSignal): [Promise<unknown>, Promise<unknown>] {
    const options = signal === undefined ? undefined : { abortSignal: signal };
    const first$ = settable();
    const second$ = settable();
    this.#client
      .use(async (client) => {
        const replies = [
          client.sendCommand(false, first, options),
          client.sendCommand(false, second, options),
        ];
        // Each reply is handed on as soon as it is in, not when the pair is done.
        replies[0]?.then(first$.resolve, first$.reject);
        replies[1]?.then(second$.resolve, second$.reject);
        // The lease is held until both replies are in: no other command shares the connection.
        await Promise.allSettled(replies);
      })
      .catch((error: unknown) => {
        // No connection could be leased: neither command was sent.
        first$.reject(error);
        second$.reject(error);
      });
    return [first$.promise, second$.promise];
  }

  openSubscriber(events: SubscriberEvents): Promise<Subscriber> {
    return Promise.resolve(new SentinelSubscription(this.#client, events));
  }
}

/**
 * Subscriptions through the Sentinel client's own pub/sub connection, which follows the master.
 * After a failover (`topology-change` of type `MASTER_CHANGE`) the client subscribes again on
 * the new master; once a subscription made after the change is confirmed, the listeners are
 * back, and waiters are told to check again (messages of the gap were missed).
 */
class SentinelSubscription implements Subscriber {
  readonly #client: NodeRedisSentinelClient;
  readonly #subscribed = new Map<string, Set<MessageListener>>();
  readonly #onTopology: (event: { readonly type?: unknown }) => void;
  #destroyed = false;

  constructor(client: NodeRedisSentinelClient, events: SubscriberEvents) {
    this.#client = client;
    this.#onTopology = (event) => {
      if (event.type !== 'MASTER_CHANGE' || this.#destroyed) return;
      const first = this.#subscribed.entries().next();
      if (first.done === true) {
        events.onReconnect();
        return;
      }
      // A subscription sent now waits for the connection to the new master, which carries
      // every listener over before it takes new commands.
      const [channel, listeners] = first.value;
      const [listener] = listeners;
      if (listener === undefined) return;
      this.#client.subscribe(channel, listener).then(
        () => {
          if (!this.#destroyed) events.onReconnect();
        },
        (error: unknown) => {
          if (!this.#destroyed) {
            events.onError(error instanceof Error ? error : new Error(String(error)));
            events.onReconnect();
          }
        },
      );
    };
    client.on('topology-change', this.#onTopology);
  }

  async subscribe(channel: string, listener: MessageListener): Promise<unknown> {
    let listeners = this.#subscribed.get(channel);
    if (listeners === undefined) {
      listeners = new Set();
      this.#subscribed.set(channel, listeners);
    }
    listeners.add(listener);
    return this.#client.subscribe(channel, listener);
  }

  async unsubscribe(channel: string, listener: MessageListener): Promise<unknown> {
    const listeners = this.#subscribed.get(channel);
    listeners?.delete(listener);
    if (listeners?.size === 0) this.#subscribed.delete(channel);
    return this.#client.unsubscribe(channel, listener as StringOrBufferListener);
  }

  /** The pub/sub connection is the user's client's: whether it holds the process open is theirs. */
  unref(): void {
    // Nothing of latchkey's own to unref.
  }

  ref(): void {
    // Nothing of latchkey's own to ref.
  }

  /** Takes latchkey's listeners off the user's client; the client itself stays open. */
  destroy(): void {
    this.#destroyed = true;
    this.#client.off('topology-change', this.#onTopology);
    for (const [channel, listeners] of this.#subscribed) {
      for (const listener of listeners) {
        this.#client.unsubscribe(channel, listener as StringOrBufferListener).catch(() => undefined);
      }
    }
    this.#subscribed.clear();
  }
}
