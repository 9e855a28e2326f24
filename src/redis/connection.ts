/**
 * A node-redis client: `createClient()` of the `redis` package, v5 or later, connected. The
 * parts latchkey uses; it never closes the client.
 */
export interface NodeRedisClient {
  sendCommand(args: string[], options?: { abortSignal?: AbortSignal }): Promise<unknown>;
  duplicate(): NodeRedisSubscriber;
  /** Connected and ready: a command sent now is written out at once. */
  readonly isReady?: boolean;
  /** Opened with `connect()` and not closed since; a client that is not is refused. */
  readonly isOpen?: boolean;
}

/**
 * The subscriber connection latchkey opens with `duplicate()` of a node-redis client for unlock
 * notifications, and closes in {@link LockClient.close}.
 */
export interface NodeRedisSubscriber {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  unsubscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
  destroy(): unknown;
  ref?(): void;
  unref?(): void;
}

/**
 * An ioredis client: `new Redis()` of the `ioredis` package, v5 or later, standalone, not
 * closed. The parts latchkey looks at; it never closes the client. latchkey does not import
 * ioredis: a client is recognised by its shape.
 */
export interface IoRedisClient {
  /** `wait` (lazyConnect, not connected yet) and `end` (closed) are refused. */
  readonly status: string;
  readonly options: object;
  sendCommand(command: unknown): unknown;
  duplicate(override?: unknown): unknown;
  pipeline(): unknown;
}

/**
 * A node-redis Sentinel client: `createSentinel()` of the `redis` package, v5 or later,
 * connected. The parts latchkey uses; it never closes the client.
 */
export interface NodeRedisSentinelClient {
  sendCommand(
    isReadonly: boolean | undefined,
    args: string[],
    options?: { abortSignal?: AbortSignal },
  ): Promise<unknown>;
  /** Runs `fn` on one master connection leased to it alone. */
  use<T>(
    fn: (client: {
      sendCommand(
        isReadonly: boolean | undefined,
        args: string[],
        options?: { abortSignal?: AbortSignal },
      ): Promise<unknown>;
    }) => Promise<T>,
  ): Promise<T>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  /** Its listener type allows Buffers (for buffer-mode listeners); latchkey's get strings. */
  unsubscribe(
    channel: string,
    listener: (message: string | Buffer, channel: string | Buffer) => void,
  ): Promise<unknown>;
  getMasterNode(): unknown;
  on(event: 'topology-change', listener: (event: { readonly type?: unknown }) => void): unknown;
  off(event: 'topology-change', listener: (event: { readonly type?: unknown }) => void): unknown;
  readonly isOpen?: boolean;
  /** Connected to the master and ready. */
  readonly isReady?: boolean;
}

/**
 * A node-redis Redis Cluster client: `createCluster()` of the `redis` package, v5 or later,
 * connected. The parts latchkey uses; it never closes the client.
 */
export interface NodeRedisClusterClient {
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
    options?: { abortSignal?: AbortSignal },
  ): Promise<unknown>;
  /** A new cluster client with the same options; latchkey uses it as a {@link NodeRedisClusterSubscriber}. */
  duplicate(overrides?: { minimizeConnections?: boolean }): unknown;
  nodeClient(node: unknown): unknown;
  /** Opened with `connect()` and not closed since. */
  readonly isOpen?: boolean;
  /** The slot table; node-redis makes a new one whenever it learns the cluster's layout again. */
  readonly slots?: unknown;
}

/** The cluster client latchkey opens with `duplicate()` for its subscriptions, and closes. */
export interface NodeRedisClusterSubscriber {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: MessageListener): Promise<unknown>;
  unsubscribe(channel: string, listener: MessageListener): Promise<unknown>;
  sSubscribe(channel: string, listener: MessageListener): Promise<unknown>;
  sUnsubscribe(channel: string, listener: MessageListener): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  destroy(): unknown;
  /** node-redis's records of the nodes it knows (read for ref/unref of their connections). */
  readonly masters?: unknown;
  readonly replicas?: unknown;
  readonly pubSubNode?: unknown;
}

/**
 * A Valkey GLIDE standalone client: `GlideClient.createClient()` of `@valkey/valkey-glide`, 2.x.
 * The parts latchkey uses; it never closes the client. latchkey does not import GLIDE: a client
 * is recognised by its shape.
 */
export interface GlideClientLike {
  customCommand(args: string[]): Promise<unknown>;
  invokeScript(script: never, options?: never): Promise<unknown>;
  getPubSubMessage(): Promise<unknown>;
  close(errorMessage?: string): void;
}

/**
 * A Valkey GLIDE cluster client: `GlideClusterClient.createClient()` of `@valkey/valkey-glide`,
 * 2.x. The parts latchkey uses beyond {@link GlideClientLike}'s; it never closes the client.
 */
export interface GlideClusterClientLike extends GlideClientLike {
  /** `route` says which node runs the command: latchkey names the master of the first key's slot. */
  customCommand(args: string[], options?: { route?: unknown }): Promise<unknown>;
  invokeScriptWithRoute(script: never, options?: never): Promise<unknown>;
}

/**
 * The clients a {@link LockClient} accepts, connected: node-redis (standalone, Redis Cluster or
 * Sentinel), ioredis or iovalkey (standalone, or with `sentinels`), or Valkey GLIDE
 * (`GlideClient`, `GlideClusterClient`).
 */
export type LockRedisClient =
  | NodeRedisClient
  | NodeRedisClusterClient
  | NodeRedisSentinelClient
  | IoRedisClient
  | GlideClientLike
  | GlideClusterClientLike;

/** A listener of one channel: the message and the channel it came on. @internal */
export type MessageListener = (message: string, channel: string) => void;

/** What the subscriber connection reports. @internal */
export interface SubscriberEvents {
  /** A connection error; the connection reconnects by itself. */
  onError(error: Error): void;
  /**
   * Subscribed again after a reconnect: messages published meanwhile were missed, so whoever
   * waits for one checks again now.
   */
  onReconnect(): void;
}

/** The subscriber connection latchkey opens for unlock messages and hand-overs. @internal */
export interface Subscriber {
  /** Resolves once the server confirmed the subscription. */
  subscribe(channel: string, listener: MessageListener): Promise<unknown>;
  unsubscribe(channel: string, listener: MessageListener): Promise<unknown>;
  /** Lets the process exit while this connection is open (see each adapter for limits). */
  unref(): void;
  /** Undoes {@link Subscriber.unref}: the open connection keeps the process alive again. */
  ref(): void;
  /** Closes the connection at once; it does not reconnect. */
  destroy(): void;
}

/**
 * The connection the engine talks to, whichever library the user's client comes from: one
 * adapter per library (node-redis.ts, ioredis.ts), chosen by adapt.ts.
 * @internal
 */
export interface RedisConnection {
  /** For messages: which library the client is from. */
  readonly library: 'node-redis' | 'ioredis' | 'iovalkey' | 'glide' | 'node-redis-sentinel';
  /**
   * Whether a command sent now is written out at once and never written again. When not, pass
   * `send` a signal: aborting it makes every command sent with it that was not written yet
   * reject and never reach the server.
   */
  readonly sendsAtOnce: boolean;
  /**
   * Whether the client is connected and ready, for messages; when absent, `sendsAtOnce` says it
   * (an adapter that never sends at once, as through a connection pool, tells it apart).
   */
  readonly connected?: boolean;
  /**
   * Sends one command; the reply as the library gives it (see `plainReply` in replies.ts for the
   * form the engine reads). A command is written to the server at most once: one whose
   * connection drops before its reply rejects (at the latest once the connection is back)
   * instead of being sent again.
   */
  send(args: string[], signal?: AbortSignal): Promise<unknown>;
  /**
   * Sends two commands back to back on one connection, the second written right behind the
   * first without waiting for its reply (a write and the `WAIT` for it, which counts only the
   * writes of its own connection). Optional: without it, two {@link RedisConnection.send} calls
   * in a row do the same, which holds for a client with one connection.
   */
  sendPair?(first: string[], second: string[], signal?: AbortSignal): [Promise<unknown>, Promise<unknown>];
  /** Whether the user closed the client: it will not connect again. */
  readonly closed: boolean;
  /** Opens a connection of its own for subscriptions (the user's client is left as it is). */
  openSubscriber(events: SubscriberEvents): Promise<Subscriber>;
  /**
   * Set on a Redis Cluster: each command goes to the master of its first key's slot, so a
   * script's keys must share one slot (renewals are grouped by slot) and a waiter is not handed
   * locks (its client's grant channel lies in another slot than the lock).
   */
  readonly cluster?: boolean;
  /**
   * Whether unlock messages go over sharded pub/sub: scripts publish with SPUBLISH and the
   * subscriber listens with SSUBSCRIBE. Known once {@link RedisConnection.noteServerVersion} ran.
   */
  readonly shardedPubSub?: boolean;
  /** Told the server's version (from `INFO server`) before the first script runs. */
  noteServerVersion?(version: string): void;
}
