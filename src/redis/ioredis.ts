/**
 * The adapter for ioredis clients, and for iovalkey's (its Valkey fork, which builds, queues and
 * resends commands as ioredis 5 does). Neither is ever imported: a client is recognised by its
 * shape, and commands are built with the Command class the client itself uses.
 *
 * Two habits of ioredis are turned off for latchkey's commands, per command, without touching
 * the user's client options:
 * - a command written to a connection that then dropped is written again after the reconnect
 *   (`autoResendUnfulfilledCommands`): a script call whose first copy may have run would run
 *   twice, unasked. latchkey's command instead rejects, as with node-redis, and the engine
 *   retries it in its own way (a repeated call says that it is one).
 * - a command sent while disconnected waits in the offline queue and is written whenever the
 *   connection is back: one the engine gave up on (its timeout passed) is withdrawn instead.
 * A command so stopped still reaches ioredis's writer, which then sends `PING` in its place, so
 * ioredis's reply bookkeeping stays in step.
 */
import type {
  IoRedisClient,
  MessageListener,
  RedisConnection,
  Subscriber,
  SubscriberEvents,
} from './connection.js';

/** Why an ioredis client cannot be used. @internal */
export type IoRedisProblem = 'cluster' | 'lazy' | 'closed' | 'subscriber';

/** A command of ioredis, as far as latchkey uses it. */
interface IoRedisCommand {
  readonly promise: Promise<unknown>;
  /** What ioredis writes to the socket; called when it writes the command. */
  toWritable: (this: IoRedisCommand, socket: unknown) => string | Buffer;
}

/** @internal */
export type IoRedisCommandClass = new (
  name: string,
  args: string[],
  options: { readonly replyEncoding: 'utf8' },
) => IoRedisCommand;

/** The subscriber connection: a `duplicate()` of the user's client. */
interface IoRedisSubscriberClient {
  readonly status: string;
  readonly stream?: { ref?(): unknown; unref?(): unknown } | null;
  connect(): Promise<unknown>;
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  ping(): Promise<unknown>;
  disconnect(): void;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'ready' | 'connect' | 'reconnecting', listener: () => void): unknown;
}

/** `PING` in RESP: what is written instead of a command that must not go out (again). */
const PING = '*1\r\n$4\r\nPING\r\n';

/**
 * Whether `redis` looks like an ioredis client (standalone or Cluster). Checked before the
 * node-redis shape, which an ioredis client also has.
 * @internal
 */
export function isIoRedis(redis: unknown): redis is IoRedisClient {
  if (typeof redis !== 'object' || redis === null) return false;
  const candidate = redis as Partial<Record<keyof IoRedisClient, unknown>>;
  return (
    typeof candidate.status === 'string' &&
    typeof candidate.options === 'object' &&
    candidate.options !== null &&
    typeof candidate.sendCommand === 'function' &&
    typeof candidate.duplicate === 'function' &&
    typeof candidate.pipeline === 'function'
  );
}

/**
 * Which of the two libraries an ioredis-shaped client comes from, for messages only: iovalkey
 * (the Valkey fork of ioredis 5) is driven exactly as ioredis is. Its clients have
 * `clearSocketTimeout`, which ioredis 5 and 6 do not.
 * @internal
 */
export function ioRedisLibrary(redis: IoRedisClient): 'ioredis' | 'iovalkey' {
  return typeof (redis as { clearSocketTimeout?: unknown }).clearSocketTimeout === 'function'
    ? 'iovalkey'
    : 'ioredis';
}

/**
 * Why the ioredis client `redis` cannot be used, or undefined when it can. A client that is
 * connecting or reconnecting is fine: its commands wait in its offline queue.
 * @internal
 */
export function ioRedisProblem(redis: IoRedisClient): IoRedisProblem | undefined {
  if ((redis as { isCluster?: unknown }).isCluster === true) return 'cluster';
  // A client with `sentinels` is a plain client that finds the master through them and goes
  // back to them after it loses its connection (as after a failover); so is its duplicate().
  if (redis.status === 'wait') return 'lazy';
  if (redis.status === 'end') return 'closed';
  const mode = (redis as { mode?: unknown }).mode;
  if (mode !== undefined && mode !== 'normal') return 'subscriber';
  return undefined;
}

/**
 * The Command class of the client's copy of ioredis (the one it builds every command with),
 * read off a command built by a pipeline of the client: the pipeline is dropped unsent, and
 * nothing is sent on the client. Undefined for a client this adapter does not know how to
 * drive.
 * @internal
 */
export function commandClass(redis: IoRedisClient): IoRedisCommandClass | undefined {
  let found: unknown;
  try {
    const pipeline = redis.pipeline() as { sendCommand?: unknown; call?: unknown };
    if (typeof pipeline !== 'object' || pipeline === null || typeof pipeline.call !== 'function') {
      return undefined;
    }
    pipeline.sendCommand = (command: unknown): unknown => {
      found = (command as { constructor?: unknown } | null)?.constructor;
      return pipeline;
    };
    (pipeline.call as (name: string) => unknown).call(pipeline, 'PING');
  } catch {
    return undefined;
  }
  if (typeof found !== 'function') return undefined;
  const prototype = (found as { prototype?: Partial<IoRedisCommand> }).prototype;
  return typeof prototype?.toWritable === 'function' ? (found as IoRedisCommandClass) : undefined;
}

/**
 * The connection to Redis through an ioredis client (checked by {@link ioRedisProblem} first).
 * @internal
 */
export class IoRedisConnection implements RedisConnection {
  readonly library: 'ioredis' | 'iovalkey';
  readonly #client: IoRedisClient;
  readonly #Command: IoRedisCommandClass;

  /** `Command`: from {@link commandClass}; `library`: from {@link ioRedisLibrary}. */
  constructor(client: IoRedisClient, Command: IoRedisCommandClass, library: 'ioredis' | 'iovalkey') {
    this.#client = client;
    this.#Command = Command;
    this.library = library;
  }

  get closed(): boolean {
    return this.#client.status === 'end';
  }

  /** A ready client writes a command out at once, and this adapter never lets one out twice. */
  get sendsAtOnce(): boolean {
    return this.#client.status === 'ready';
  }

  send(args: string[], signal?: AbortSignal): Promise<unknown> {
    const command = new this.#Command(args[0] ?? '', args.slice(1), { replyEncoding: 'utf8' });
    return new Promise<unknown>((resolve, reject) => {
      let written = false;
      let settled = false;
      const onAbort = (): void => {
        // A command written already is answered (or rejected) as usual.
        if (!written) fail(new Error('The command was withdrawn before it was sent'));
      };
      const fail = (error: unknown): void => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      };
      const write = command.toWritable;
      command.toWritable = function toWritable(this: IoRedisCommand, socket: unknown): string | Buffer {
        if (written) {
          // ioredis sends it again after a reconnect: its first copy may have run.
          fail(new Error('The connection was lost before the reply; the command is not sent again'));
          return PING;
        }
        // Withdrawn, or failed already (ioredis's own commandTimeout): never let it out.
        if (settled) return PING;
        written = true;
        return write.call(this, socket);
      };
      command.promise.then(
        (reply) => {
          if (settled) return;
          settled = true;
          signal?.removeEventListener('abort', onAbort);
          resolve(reply);
        },
        (error: unknown) => fail(error),
      );
      if (signal !== undefined) {
        if (signal.aborted) {
          onAbort();
          return;
        }
        signal.addEventListener('abort', onAbort, { once: true });
      }
      try {
        this.#client.sendCommand(command);
      } catch (error) {
        fail(error);
      }
    });
  }

  async openSubscriber(events: SubscriberEvents): Promise<Subscriber> {
    // The user's options (address, credentials, TLS, connection name, retry strategy), except
    // that it connects when told to, and that latchkey subscribes again after a reconnect, not
    // ioredis: ioredis subscribes again only to the channels the last connection had confirmed,
    // so a connection that drops again before the server confirms them loses them all (as in a
    // failover, when the new master is demoted or restarted in turn).
    const client = this.#client.duplicate({
      lazyConnect: true,
      autoResubscribe: false,
      enableAutoPipelining: false,
    }) as IoRedisSubscriberClient;
    client.on('error', (error) => events.onError(error));
    const subscription = new IoRedisSubscription(client);
    let connected = false;
    client.on('ready', () => {
      if (!connected) {
        connected = true;
        return;
      }
      // Every channel asked for is subscribed again, on each new connection; once the server
      // confirms them, it has them all. Whatever was published meanwhile was missed. Should this
      // connection drop too, the next one subscribes to them all again.
      const reconnected = (): void => events.onReconnect();
      subscription.resubscribe().then(reconnected, reconnected);
    });
    try {
      await client.connect();
    } catch (error) {
      client.disconnect();
      // ioredis says "Connection is closed." both when its user closed it and when the socket
      // closed before the connection was ready (the server died or restarted meanwhile). This
      // connection is latchkey's own and was not closed by anyone: the server could not be
      // reached, which a waiter rides out.
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(`The subscriber connection could not be opened: ${reason}`, { cause: error });
    }
    return subscription;
  }
}

/** One listener of ioredis's per client, dispatching by channel. */
class IoRedisSubscription implements Subscriber {
  readonly #client: IoRedisSubscriberClient;
  readonly #channels = new Map<
    string,
    { readonly listeners: Set<MessageListener>; ready: Promise<unknown> }
  >();
  #unref = false;

  constructor(client: IoRedisSubscriberClient) {
    this.#client = client;
    client.on('message', (channel, message) => {
      const entry = this.#channels.get(channel);
      if (entry === undefined) return;
      for (const listener of entry.listeners) listener(message, channel);
    });
    // Each reconnect opens a new socket.
    client.on('connect', () => this.#applyRef());
    client.on('reconnecting', () => this.#applyRef());
  }

  subscribe(channel: string, listener: MessageListener): Promise<unknown> {
    const known = this.#channels.get(channel);
    if (known !== undefined) {
      known.listeners.add(listener);
      return known.ready;
    }
    const entry = { listeners: new Set([listener]), ready: Promise.resolve() as Promise<unknown> };
    entry.ready = this.#client.subscribe(channel).catch((error: unknown) => {
      // The next subscriber tries again.
      if (this.#channels.get(channel) === entry) this.#channels.delete(channel);
      throw error;
    });
    this.#channels.set(channel, entry);
    return entry.ready;
  }

  /** Subscribes to every channel asked for again (after a reconnect); with none, a PING. */
  resubscribe(): Promise<unknown> {
    const channels = [...this.#channels.keys()];
    return channels.length > 0 ? this.#client.subscribe(...channels) : this.#client.ping();
  }

  unsubscribe(channel: string, listener: MessageListener): Promise<unknown> {
    const entry = this.#channels.get(channel);
    if (entry === undefined || !entry.listeners.delete(listener)) return Promise.resolve();
    if (entry.listeners.size > 0) return Promise.resolve();
    this.#channels.delete(channel);
    return this.#client.unsubscribe(channel);
  }

  /**
   * Unrefs the socket, now and after each reconnect, and ioredis's timer that waits to
   * reconnect. That timer is not part of ioredis's documented API: if a version of ioredis
   * names it otherwise, a process waits for the reconnect (or for ioredis to give up) before
   * it can exit.
   */
  unref(): void {
    this.#unref = true;
    this.#applyRef();
  }

  ref(): void {
    this.#unref = false;
    this.#applyRef();
  }

  destroy(): void {
    this.#channels.clear();
    this.#client.disconnect();
  }

  #applyRef(): void {
    const timer = (this.#client as { reconnectTimeout?: { ref?(): unknown; unref?(): unknown } | null })
      .reconnectTimeout;
    for (const handle of [this.#client.stream, timer]) {
      if (this.#unref) handle?.unref?.();
      else handle?.ref?.();
    }
  }
}
