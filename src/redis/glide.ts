/**
 * The adapter for Valkey GLIDE clients (`GlideClient` of `@valkey/valkey-glide`, 2.x). GLIDE is
 * never imported: a client is recognised by its shape, and the subscriber connection is made by
 * the client's own class.
 *
 * How GLIDE differs from the other libraries, as far as latchkey is concerned:
 * - Commands go through `customCommand`; the Rust core does not write a command again after a
 *   reconnect, so one whose connection drops rejects. A command sent while the connection is
 *   down waits for the reconnect and cannot be withdrawn: GLIDE has no per-command abort.
 * - GLIDE's `requestTimeout` (250 ms unless set) bounds every command; a command that timed out
 *   may still have run. Set it to at least latchkey's `commandTimeoutMs`.
 * - There is no `duplicate()`. The subscriber is a second client made by the user's client's
 *   class from the configuration that client was created with (GLIDE keeps it on the client),
 *   with a message callback added; subscriptions are added and removed while it runs (GLIDE
 *   2.x), and GLIDE subscribes again by itself after a reconnect. It needs RESP3 (GLIDE's
 *   default): a RESP2 configuration's subscriber is switched to RESP3.
 * - GLIDE does not tell its user that the subscriber reconnected: the server's confirmations of
 *   GLIDE's own resubscription are taken as the sign (see GlideSubscription), and no connection
 *   error of the subscriber is reported (GLIDE reports none).
 */
import type {
  GlideClientLike,
  MessageListener,
  RedisConnection,
  Subscriber,
  SubscriberEvents,
} from './connection.js';

/** Why a GLIDE client cannot be used. @internal */
export type GlideProblem = 'cluster' | 'closed' | 'subscriber' | 'unknown-version';

/** A message as GLIDE hands it to the callback. */
interface GlideMessage {
  readonly message: unknown;
  readonly channel: unknown;
}

/** The subscriber client, made by the user's client's class. */
interface GlideSubscriberClient {
  subscribe(channels: Iterable<string>, timeoutMs: number): Promise<unknown>;
  /** `null`: every channel. */
  unsubscribe(channels: Iterable<string> | null, timeoutMs: number): Promise<unknown>;
  close(errorMessage?: string): void;
}

interface GlideClientClass {
  createClient(configuration: object): Promise<GlideSubscriberClient>;
}

/** GLIDE's ProtocolVersion.RESP3. */
const RESP3 = 0;
/** GLIDE's PubSubChannelModes.Exact. */
const EXACT_CHANNELS = 0;
/** How long after the last unasked push of a reconnect the reconnect is told. */
const RECONNECT_SETTLE_MS = 20;
/** How long a subscription waits for the server's confirmation. */
const SUBSCRIBE_TIMEOUT_MS = 10_000;

/**
 * A server's error reply, under the name the other libraries give theirs (see replies.ts).
 * @internal
 */
export class ReplyError extends Error {
  override readonly name = 'ReplyError';
}

/** Whether `redis` looks like a GLIDE client (standalone or cluster). @internal */
export function isGlide(redis: unknown): redis is GlideClientLike {
  if (typeof redis !== 'object' || redis === null) return false;
  const candidate = redis as Partial<Record<keyof GlideClientLike, unknown>>;
  return (
    typeof candidate.customCommand === 'function' &&
    typeof candidate.invokeScript === 'function' &&
    typeof candidate.getPubSubMessage === 'function' &&
    typeof candidate.close === 'function'
  );
}

/** Why the GLIDE client `redis` cannot be used, or undefined when it can. @internal */
export function glideProblem(redis: GlideClientLike): GlideProblem | undefined {
  // GlideClusterClient routes by key itself; latchkey does not drive it yet.
  if (typeof (redis as { invokeScriptWithRoute?: unknown }).invokeScriptWithRoute === 'function') {
    return 'cluster';
  }
  if ((redis as { isClosed?: unknown }).isClosed === true) return 'closed';
  const config = configOf(redis);
  if (config === undefined || typeof classOf(redis)?.createClient !== 'function') return 'unknown-version';
  // A client created with subscriptions gets its messages through them; latchkey's own
  // subscriber is a client of its own.
  if ((config as { pubsubSubscriptions?: unknown }).pubsubSubscriptions !== undefined) return 'subscriber';
  return undefined;
}

/** The configuration the client was created with (a field GLIDE keeps, not documented). */
function configOf(redis: GlideClientLike): object | undefined {
  const config = (redis as { config?: unknown }).config;
  return typeof config === 'object' && config !== null ? config : undefined;
}

function classOf(redis: GlideClientLike): Partial<GlideClientClass> | undefined {
  return (redis as { constructor?: Partial<GlideClientClass> }).constructor;
}

/**
 * The error codes of the server's replies that GLIDE's core names by a kind of its own, and
 * writes as "An error was signalled by the server: - NoScriptError: No matching script…".
 * Other codes it writes as "WRONGTYPE: Operation against…".
 */
const SERVER_ERROR_CODES: Readonly<Record<string, string>> = {
  ResponseError: 'ERR',
  ExecAbortError: 'EXECABORT',
  BusyLoadingError: 'LOADING',
  NoScriptError: 'NOSCRIPT',
  Moved: 'MOVED',
  Ask: 'ASK',
  TryAgain: 'TRYAGAIN',
  ClusterDown: 'CLUSTERDOWN',
  CrossSlot: 'CROSSSLOT',
  MasterDown: 'MASTERDOWN',
  ReadOnly: 'READONLY',
  NotBusy: 'NOTBUSY',
  PermissionDenied: 'NOPERM',
};

const NAMED_KIND = /^An error was signalled by the server: - (\w+): ([\s\S]*)$/;
const CODE_FIRST = /^([A-Z][A-Z0-9_-]*): ([\s\S]*)$/;

/** A server error as the server wrote it, "CODE detail", from GLIDE's wording of it. */
function serverErrorText(message: string): string {
  const named = NAMED_KIND.exec(message);
  if (named !== null) {
    const code = SERVER_ERROR_CODES[named[1] ?? ''];
    return code === undefined ? message : `${code} ${named[2] ?? ''}`;
  }
  const coded = CODE_FIRST.exec(message);
  return coded === null ? message : `${coded[1] ?? ''} ${coded[2] ?? ''}`;
}

/** GLIDE's errors as the engine reads errors (see replies.ts). */
function translated(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const kind = error.constructor.name;
  if (kind === 'RequestError') return new ReplyError(serverErrorText(error.message), { cause: error });
  if (kind === 'ClosingError') return new Error('The client is closed', { cause: error });
  return error;
}

/**
 * A RESP3 map as GLIDE gives it (an array of `{ key, value }`), flattened into the
 * key-value array of RESP2, as the other libraries give maps; anything else as it is. @internal
 */
export function flatMaps(reply: unknown): unknown {
  if (!Array.isArray(reply)) return reply;
  const first: unknown = reply[0];
  const isRecord =
    typeof first === 'object' &&
    first !== null &&
    !Array.isArray(first) &&
    !Buffer.isBuffer(first) &&
    'key' in first;
  if (!isRecord) return reply.map(flatMaps);
  return (reply as { key: unknown; value: unknown }[]).flatMap(({ key, value }) => [key, flatMaps(value)]);
}

/** The connection to Redis through a GLIDE standalone client (checked by {@link glideProblem}). @internal */
export class GlideConnection implements RedisConnection {
  readonly library = 'glide';
  readonly #client: GlideClientLike;

  constructor(client: GlideClientLike) {
    this.#client = client;
  }

  get closed(): boolean {
    return (this.#client as { isClosed?: unknown }).isClosed === true;
  }

  /**
   * GLIDE does not say whether its connection is up: a command is taken as written at once (it
   * is never written twice), and one sent while the connection is down waits for the reconnect
   * within GLIDE's `requestTimeout`.
   */
  get sendsAtOnce(): boolean {
    return !this.closed;
  }

  async send(args: string[], signal?: AbortSignal): Promise<unknown> {
    if (signal?.aborted === true) throw new Error('The command was withdrawn before it was sent');
    try {
      return flatMaps(await this.#client.customCommand(args));
    } catch (error) {
      throw translated(error);
    }
  }

  async openSubscriber(events: SubscriberEvents): Promise<Subscriber> {
    const Client = classOf(this.#client) as GlideClientClass;
    const config = configOf(this.#client) ?? {};
    const subscription = new GlideSubscription();
    const protocol = (config as { protocol?: unknown }).protocol;
    const client = await Client.createClient({
      ...config,
      lazyConnect: false,
      ...(protocol === undefined || protocol === RESP3 ? {} : { protocol: RESP3 }),
      pubsubSubscriptions: {
        channelsAndPatterns: { [EXACT_CHANNELS]: new Set<string>() },
        callback: (message: GlideMessage) => subscription.deliver(message),
      },
    });
    subscription.attach(client, events);
    return subscription;
  }
}

/** One callback of GLIDE's per subscriber client, dispatching by channel. */
class GlideSubscription implements Subscriber {
  #client: GlideSubscriberClient | undefined;
  #events: SubscriberEvents | undefined;
  readonly #channels = new Map<
    string,
    { readonly listeners: Set<MessageListener>; ready: Promise<unknown> }
  >();

  /** Confirmations of this subscriber's own SUBSCRIBE and UNSUBSCRIBE still to come. */
  #confirmations = 0;
  #reconnectNotice: ReturnType<typeof setTimeout> | undefined;

  attach(client: GlideSubscriberClient, events: SubscriberEvents): void {
    this.#client = client;
    this.#events = events;
    this.#watchPushes(client);
  }

  /**
   * GLIDE tells nothing of a reconnect, but after one its core subscribes again to every
   * channel, and the server confirms each: a push that is neither a message nor the
   * confirmation of a call of this subscriber is taken as that (or as the notice of the
   * disconnect before it), and whoever waits checks again. Seen through the method GLIDE reads
   * each push with (not documented); without it, no reconnect is noticed.
   */
  #watchPushes(client: GlideSubscriberClient): void {
    const target = client as { notificationToPubSubMessageSafe?: unknown };
    const read = target.notificationToPubSubMessageSafe;
    if (typeof read !== 'function') return;
    target.notificationToPubSubMessageSafe = (...args: unknown[]): unknown => {
      const message: unknown = (read as (...given: unknown[]) => unknown).apply(client, args);
      if (message !== null && message !== undefined) return message;
      if (this.#confirmations > 0) this.#confirmations -= 1;
      else this.#noticeReconnect();
      return message;
    };
  }

  /** One notice for the confirmations of one reconnect, once they are all in. */
  #noticeReconnect(): void {
    if (this.#reconnectNotice !== undefined) clearTimeout(this.#reconnectNotice);
    this.#reconnectNotice = setTimeout(() => {
      this.#reconnectNotice = undefined;
      this.#events?.onReconnect();
    }, RECONNECT_SETTLE_MS);
    this.#reconnectNotice.unref?.();
  }

  #confirmed(): void {
    if (this.#confirmations > 0) this.#confirmations -= 1;
  }

  deliver(message: GlideMessage): void {
    const channel = String(message.channel);
    const entry = this.#channels.get(channel);
    if (entry === undefined) return;
    const text = String(message.message);
    for (const listener of entry.listeners) listener(text, channel);
  }

  subscribe(channel: string, listener: MessageListener): Promise<unknown> {
    const known = this.#channels.get(channel);
    if (known !== undefined) {
      known.listeners.add(listener);
      return known.ready;
    }
    const entry = { listeners: new Set([listener]), ready: Promise.resolve() as Promise<unknown> };
    const client = this.#ready();
    this.#confirmations += 1;
    entry.ready = client.subscribe([channel], SUBSCRIBE_TIMEOUT_MS).catch((error: unknown) => {
      this.#confirmed();
      // The next subscriber tries again.
      if (this.#channels.get(channel) === entry) this.#channels.delete(channel);
      const failure = translated(error);
      this.#events?.onError(failure);
      throw failure;
    });
    this.#channels.set(channel, entry);
    return entry.ready;
  }

  unsubscribe(channel: string, listener: MessageListener): Promise<unknown> {
    const entry = this.#channels.get(channel);
    if (entry === undefined || !entry.listeners.delete(listener)) return Promise.resolve();
    if (entry.listeners.size > 0) return Promise.resolve();
    this.#channels.delete(channel);
    const client = this.#ready();
    this.#confirmations += 1;
    return client.unsubscribe([channel], SUBSCRIBE_TIMEOUT_MS).catch((error: unknown) => {
      this.#confirmed();
      throw translated(error);
    });
  }

  /** The socket to GLIDE's core (a field GLIDE keeps, not documented). */
  unref(): void {
    this.#socket()?.unref?.();
  }

  ref(): void {
    this.#socket()?.ref?.();
  }

  /**
   * GLIDE's `close()` leaves the connection to the server open for a while (its core drops it
   * later), still subscribed: a hand-over would then go to this closed client's waiters, whose
   * grant channel still counts a listener. So the subscriptions are dropped first.
   */
  destroy(): void {
    const client = this.#client;
    this.#channels.clear();
    if (this.#reconnectNotice !== undefined) clearTimeout(this.#reconnectNotice);
    this.#events = undefined;
    if (client === undefined) return;
    void client
      .unsubscribe(null, SUBSCRIBE_TIMEOUT_MS)
      .catch(() => {})
      .finally(() => client.close());
  }

  #ready(): GlideSubscriberClient {
    if (this.#client === undefined) throw new Error('The subscriber is not connected yet');
    return this.#client;
  }

  #socket(): { ref?(): unknown; unref?(): unknown } | undefined {
    const socket = (this.#client as { socket?: unknown } | undefined)?.socket;
    return typeof socket === 'object' && socket !== null ? socket : undefined;
  }
}
