import type {
  MessageListener,
  NodeRedisClient,
  NodeRedisSubscriber,
  RedisConnection,
  Subscriber,
  SubscriberEvents,
} from './connection.js';
import { unwrittenCommandsOf, type UnwrittenCommands } from './node-redis-unwritten.js';

/** Why a value cannot be used as a node-redis client. @internal */
export type NodeRedisProblem = 'not-a-client' | 'cluster' | 'sentinel' | 'not-open';

/**
 * Whether `redis` is a node-redis `createCluster()` client: it has `nodeClient()`, which a
 * standalone client has not, and what latchkey uses of a cluster client (`duplicate()` for its
 * subscriber, `sSubscribe()` for sharded channels).
 * @internal
 */
export function isNodeRedisCluster(redis: unknown): boolean {
  return (
    typeof redis === 'object' &&
    redis !== null &&
    typeof (redis as Candidate).sendCommand === 'function' &&
    typeof (redis as Candidate).nodeClient === 'function' &&
    typeof (redis as Candidate).duplicate === 'function' &&
    typeof (redis as Candidate).sSubscribe === 'function'
  );
}

type Candidate = Partial<
  Record<'sendCommand' | 'duplicate' | 'nodeClient' | 'getMasterNode' | 'sSubscribe', unknown>
> & {
  readonly isOpen?: unknown;
};

/**
 * Why `redis` cannot be used as a standalone node-redis client, or undefined when it can. Any
 * object with `sendCommand(args)` and `duplicate()` counts as one (wrappers included), unless
 * it says it is not open.
 * @internal
 */
export function nodeRedisProblem(redis: unknown): NodeRedisProblem | undefined {
  if (typeof redis !== 'object' || redis === null) return 'not-a-client';
  const candidate = redis as Candidate;
  if (typeof candidate.sendCommand !== 'function') return 'not-a-client';
  // createCluster() and createSentinel() clients send commands too, each in its own way.
  if (typeof candidate.nodeClient === 'function') return 'cluster';
  if (typeof candidate.getMasterNode === 'function') return 'sentinel';
  if (typeof candidate.duplicate !== 'function') return 'not-a-client';
  if (candidate.isOpen === false) return 'not-open';
  return undefined;
}

/**
 * The connection to Redis through a node-redis client.
 * @internal
 */
export class NodeRedisConnection implements RedisConnection {
  readonly library = 'node-redis';
  readonly #client: NodeRedisClient;
  readonly #unwritten: UnwrittenCommands | undefined;

  constructor(client: NodeRedisClient) {
    this.#client = client;
    this.#unwritten = unwrittenCommandsOf(client);
  }

  get closed(): boolean {
    return this.#client.isOpen === false;
  }

  /** A ready client writes a command out at once; node-redis never writes one twice. */
  get sendsAtOnce(): boolean {
    return this.#client.isReady === true;
  }

  send(args: string[], signal?: AbortSignal): Promise<unknown> {
    const unwritten = this.#unwritten;
    const draining = unwritten?.draining;
    if (draining !== undefined) return draining.then(() => this.send(args, signal));
    // An abortSignal takes a command that was never written out of node-redis's queue: the
    // caller's while the client is not ready, else one withdrawn if the connection drops first.
    if (signal !== undefined) return this.#client.sendCommand(args, { abortSignal: signal });
    return unwritten === undefined ? this.#client.sendCommand(args) : unwritten.send(this.#client, args);
  }

  async openSubscriber(events: SubscriberEvents): Promise<Subscriber> {
    const subscriber = this.#client.duplicate();
    subscriber.on('error', (error) => events.onError(error));
    let connected = false;
    subscriber.on('ready', () => {
      // The first 'ready' is the initial connection; later ones follow a reconnect, after
      // node-redis subscribed to every channel again.
      if (connected) events.onReconnect();
      connected = true;
    });
    try {
      await subscriber.connect();
    } catch (error) {
      try {
        subscriber.destroy();
      } catch {
        // Nothing to close.
      }
      throw error;
    }
    return new NodeRedisSubscription(subscriber);
  }
}

/** node-redis keeps listeners per channel itself. */
class NodeRedisSubscription implements Subscriber {
  readonly #client: NodeRedisSubscriber;

  constructor(client: NodeRedisSubscriber) {
    this.#client = client;
  }

  subscribe(channel: string, listener: MessageListener): Promise<unknown> {
    return this.#client.subscribe(channel, listener);
  }

  unsubscribe(channel: string, listener: MessageListener): Promise<unknown> {
    return this.#client.unsubscribe(channel, listener);
  }

  unref(): void {
    this.#client.unref?.();
  }

  ref(): void {
    this.#client.ref?.();
  }

  destroy(): void {
    this.#client.destroy();
  }
}
