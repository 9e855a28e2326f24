/**
 * The subscriber connection latchkey opens on a Redis Cluster, for node-redis-cluster.ts.
 */
import type {
  MessageListener,
  NodeRedisClusterSubscriber,
  Subscriber,
  SubscriberEvents,
} from './connection.js';

interface Refable {
  ref?(): void;
  unref?(): void;
}

/** node-redis's record of one node: its command and pub/sub connections, when open. */
export interface NodeOfCluster {
  readonly client?: Refable & { readonly isReady?: boolean; readonly options?: unknown };
  readonly pubSub?: { readonly client?: Refable };
}

/** How long a new subscriber may take to connect and subscribe before it is tried again. */
const RENEW_TIMEOUT_MS = 3_000;
/** Waits between failed renewals: growing, never a busy loop. */
const RENEW_RETRY_MIN_MS = 100;
const RENEW_RETRY_MAX_MS = 2_000;

/**
 * latchkey's subscriptions on a cluster: a cluster client of its own (`duplicate()`), with
 * SSUBSCRIBE per channel (the shard of the channel's slot) or, before Redis 7, SUBSCRIBE.
 * node-redis follows a slot that moves while its node stays up, but drops the subscriptions of a
 * node that dies; and messages published while a subscription moves are lost either way. So on
 * any change of the layout or trouble with a node, the subscriber is made anew with every
 * channel, and the engine told to try again (`onReconnect`).
 * @internal
 */
export class ClusterSubscription implements Subscriber {
  readonly #open: () => NodeRedisClusterSubscriber;
  readonly #sharded: boolean;
  readonly #events: SubscriberEvents;
  readonly #onDestroy: () => void;
  readonly #channels = new Map<string, MessageListener>();
  /** Resolves a subscribe call once any subscriber confirmed its channel. */
  readonly #confirm = new Map<string, Array<{ resolve: () => void; reject: (error: Error) => void }>>();
  #current: NodeRedisClusterSubscriber | undefined;
  #renewing = false;
  #renewAgain = false;
  #retryMs = RENEW_RETRY_MIN_MS;
  #destroyed = false;
  #referenced = true;

  constructor(
    open: () => NodeRedisClusterSubscriber,
    sharded: boolean,
    events: SubscriberEvents,
    onDestroy: () => void,
  ) {
    this.#open = open;
    this.#sharded = sharded;
    this.#events = events;
    this.#onDestroy = onDestroy;
  }

  /** Whether any channel is subscribed. */
  get listening(): boolean {
    return this.#channels.size > 0;
  }

  /** Connects the first subscriber; rejects when that fails. */
  async start(): Promise<void> {
    this.#current = await this.#connect();
  }

  subscribe(channel: string, listener: MessageListener): Promise<unknown> {
    if (this.#destroyed) return Promise.reject(new Error('The subscriber is closed'));
    this.#channels.set(channel, listener);
    const confirmed = new Promise<void>((resolve, reject) => {
      const waiting = this.#confirm.get(channel) ?? [];
      waiting.push({ resolve, reject });
      this.#confirm.set(channel, waiting);
    });
    const current = this.#current;
    if (current !== undefined) {
      // A node that does not answer (down, failing over) is replaced by a new subscriber, which
      // confirms every channel it subscribes.
      const timer = setTimeout(() => this.renew(), RENEW_TIMEOUT_MS);
      timer.unref();
      this.#listen(current, channel, listener).then(
        () => {
          clearTimeout(timer);
          if (this.#current === current) this.#confirmed(channel);
        },
        () => {
          clearTimeout(timer);
          this.renew();
        },
      );
    }
    return confirmed;
  }

  async unsubscribe(channel: string, listener: MessageListener): Promise<unknown> {
    if (this.#channels.get(channel) !== listener) return undefined;
    this.#channels.delete(channel);
    const current = this.#current;
    if (current === undefined) return undefined;
    return this.#sharded ? current.sUnsubscribe(channel, listener) : current.unsubscribe(channel, listener);
  }

  unref(): void {
    this.#referenced = false;
    this.#applyRef();
  }

  ref(): void {
    this.#referenced = true;
    this.#applyRef();
  }

  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#onDestroy();
    const current = this.#current;
    this.#current = undefined;
    if (current !== undefined) destroyQuietly(current);
    const closed = new Error('The subscriber is closed');
    for (const waiting of this.#confirm.values()) for (const { reject } of waiting) reject(closed);
    this.#confirm.clear();
  }

  /**
   * Replaces the subscriber with a new one subscribed to every channel, then tells the engine,
   * so waiters try again; one renewal at a time, retried until it succeeds or the subscriber is
   * closed.
   */
  renew(): void {
    if (this.#destroyed) return;
    if (this.#renewing) {
      this.#renewAgain = true;
      return;
    }
    this.#renewing = true;
    this.#renewAgain = false;
    void this.#renewOnce().then(
      () => {
        this.#retryMs = RENEW_RETRY_MIN_MS;
        // Trouble reported while renewing may predate the new subscriber: look again, soon.
        const timer = setTimeout(() => {
          this.#renewing = false;
          if (this.#renewAgain) this.renew();
        }, RENEW_RETRY_MIN_MS);
        timer.unref();
      },
      (error: unknown) => {
        if (!this.#destroyed) this.#events.onError(error instanceof Error ? error : new Error(String(error)));
        const delay = this.#retryMs;
        this.#retryMs = Math.min(RENEW_RETRY_MAX_MS, this.#retryMs * 2);
        const timer = setTimeout(() => {
          this.#renewing = false;
          this.renew();
        }, delay);
        timer.unref();
      },
    );
  }

  async #renewOnce(): Promise<void> {
    const fresh = await this.#connect();
    try {
      const channels = [...this.#channels];
      await withTimeout(
        Promise.all(channels.map(([channel, listener]) => this.#listen(fresh, channel, listener))),
        RENEW_TIMEOUT_MS,
      );
    } catch (error) {
      destroyQuietly(fresh);
      throw error;
    }
    if (this.#destroyed) {
      destroyQuietly(fresh);
      return;
    }
    const old = this.#current;
    this.#current = fresh;
    this.#applyRef();
    if (old !== undefined) destroyQuietly(old);
    for (const channel of [...this.#confirm.keys()]) {
      if (this.#channels.has(channel)) this.#confirmed(channel);
    }
    this.#events.onReconnect();
  }

  async #connect(): Promise<NodeRedisClusterSubscriber> {
    const client = this.#open();
    // Errors of a node (down, refusing) lead to a new subscriber; node-redis reports them here.
    client.on('error', (error) => this.#nodeTrouble(error));
    client.on('node-error', (error) => this.#nodeTrouble(error));
    client.on('sharded-shannel-moved-error', (error) => this.#nodeTrouble(error));
    try {
      await withTimeout(client.connect(), RENEW_TIMEOUT_MS);
    } catch (error) {
      destroyQuietly(client);
      throw error;
    }
    return client;
  }

  #nodeTrouble(error: unknown): void {
    if (this.#destroyed) return;
    this.#events.onError(error instanceof Error ? error : new Error(String(error)));
    this.renew();
  }

  #listen(client: NodeRedisClusterSubscriber, channel: string, listener: MessageListener): Promise<unknown> {
    return this.#sharded ? client.sSubscribe(channel, listener) : client.subscribe(channel, listener);
  }

  #confirmed(channel: string): void {
    const waiting = this.#confirm.get(channel);
    if (waiting === undefined) return;
    this.#confirm.delete(channel);
    for (const { resolve } of waiting) resolve();
    this.#applyRef();
  }

  /** node-redis's cluster client has no ref/unref of its own: each node connection it has open. */
  #applyRef(): void {
    const client = this.#current;
    if (client === undefined) return;
    const nodes = client as {
      masters?: readonly NodeOfCluster[];
      replicas?: readonly NodeOfCluster[];
      pubSubNode?: { readonly client?: Refable };
    };
    const connections: Array<Refable | undefined> = [nodes.pubSubNode?.client];
    for (const node of [...(nodes.masters ?? []), ...(nodes.replicas ?? [])]) {
      connections.push(node.client, node.pubSub?.client);
    }
    for (const connection of connections) {
      if (this.#referenced) connection?.ref?.();
      else connection?.unref?.();
    }
  }
}

function destroyQuietly(client: NodeRedisClusterSubscriber): void {
  try {
    client.destroy();
  } catch {
    // Closed already.
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`No answer from the cluster within ${ms} ms`)), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
