/**
 * The subscriber connection latchkey opens for a Valkey GLIDE client, standalone or cluster: a
 * second client made by the user's client's class from its configuration (see glide.ts), with
 * channels added and removed while it runs (GLIDE 2.x's dynamic subscriptions).
 */
import type { MessageListener, Subscriber, SubscriberEvents } from './connection.js';
import { translated } from './glide-replies.js';

/**
 * How the subscriber listens: `exact` with SUBSCRIBE, `sharded` with SSUBSCRIBE (a cluster client
 * on Redis 7 or later, where GLIDE sends each channel to the master of its slot).
 * @internal
 */
export type GlideChannelMode = 'exact' | 'sharded';

/** A message as GLIDE hands it to the callback. */
interface GlideMessage {
  readonly message: unknown;
  readonly channel: unknown;
}

/** Channels to (un)subscribe; `null`: every channel. */
type Channels = Iterable<string> | null;

/** The subscriber client, made by the user's client's class. */
interface GlideSubscriberClient {
  subscribe(channels: Iterable<string>, timeoutMs: number): Promise<unknown>;
  unsubscribe(channels: Channels, timeoutMs: number): Promise<unknown>;
  /** The cluster client's sharded counterparts. */
  ssubscribe?(channels: Iterable<string>, timeoutMs: number): Promise<unknown>;
  sunsubscribe?(channels: Channels, timeoutMs: number): Promise<unknown>;
  close(errorMessage?: string): void;
}

/** The class of a GLIDE client: its static `createClient`. @internal */
export interface GlideClientClass {
  createClient(configuration: object): Promise<unknown>;
}

/** GLIDE's ProtocolVersion.RESP3. */
const RESP3 = 0;
/** GLIDE's PubSubChannelModes: Exact is 0 for both clients, Sharded 2 for the cluster client. */
const CHANNEL_MODES: Readonly<Record<GlideChannelMode, number>> = { exact: 0, sharded: 2 };
/** How long after the last unasked push of a reconnect the reconnect is told. */
const RECONNECT_SETTLE_MS = 20;
/** How long a subscription waits for the server's confirmation. */
const SUBSCRIBE_TIMEOUT_MS = 10_000;
const NO_SHARDED = 'This GLIDE client has no sharded subscriptions (`ssubscribe` of GLIDE 2.x)';

/**
 * Opens the subscriber: a client of `Client` from `config` (the user's client's configuration)
 * with `overrides` on top, a message callback added, over RESP3, which GLIDE's subscriptions
 * need (a RESP2 configuration's subscriber is switched to RESP3).
 * @internal
 */
export async function openGlideSubscriber(
  Client: GlideClientClass,
  config: object,
  mode: GlideChannelMode,
  events: SubscriberEvents,
  overrides: object = {},
): Promise<Subscriber> {
  const subscription = new GlideSubscription(mode);
  const protocol = (config as { protocol?: unknown }).protocol;
  const client = await Client.createClient({
    ...config,
    ...overrides,
    lazyConnect: false,
    ...(protocol === undefined || protocol === RESP3 ? {} : { protocol: RESP3 }),
    pubsubSubscriptions: {
      channelsAndPatterns: { [CHANNEL_MODES[mode]]: new Set<string>() },
      callback: (message: GlideMessage) => subscription.deliver(message),
    },
  });
  subscription.attach(client as GlideSubscriberClient, events);
  return subscription;
}

/** One callback of GLIDE's per subscriber client, dispatching by channel. */
class GlideSubscription implements Subscriber {
  readonly #sharded: boolean;
  #client: GlideSubscriberClient | undefined;
  #events: SubscriberEvents | undefined;
  readonly #channels = new Map<
    string,
    { readonly listeners: Set<MessageListener>; ready: Promise<unknown> }
  >();

  /** Confirmations of this subscriber's own SUBSCRIBE and UNSUBSCRIBE still to come. */
  #confirmations = 0;
  #reconnectNotice: ReturnType<typeof setTimeout> | undefined;

  constructor(mode: GlideChannelMode) {
    this.#sharded = mode === 'sharded';
  }

  attach(client: GlideSubscriberClient, events: SubscriberEvents): void {
    this.#client = client;
    this.#events = events;
    this.#watchPushes(client);
  }

  /**
   * GLIDE tells nothing of a reconnect, but after one its core subscribes again to every
   * channel, and the server confirms each: a push that is neither a message nor the
   * confirmation of a call of this subscriber is taken as that (or as the notice of the
   * disconnect before it), and whoever waits checks again. On a cluster the same holds when a
   * channel's slot moves to another master (the old one unsubscribes it, GLIDE subscribes it on
   * the new one). Seen through the method GLIDE reads each push with (not documented); without
   * it, no reconnect is noticed.
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
    entry.ready = this.#listen(client, [channel]).catch((error: unknown) => {
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
    return this.#unlisten(client, [channel]).catch((error: unknown) => {
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
    void this.#unlisten(client, null)
      .catch(() => {})
      .finally(() => client.close());
  }

  /** SUBSCRIBE, or SSUBSCRIBE when sharded (glide.ts refuses a cluster client without it). */
  #listen(client: GlideSubscriberClient, channels: string[]): Promise<unknown> {
    if (!this.#sharded) return client.subscribe(channels, SUBSCRIBE_TIMEOUT_MS);
    if (client.ssubscribe === undefined) return Promise.reject(new Error(NO_SHARDED));
    return client.ssubscribe(channels, SUBSCRIBE_TIMEOUT_MS);
  }

  #unlisten(client: GlideSubscriberClient, channels: string[] | null): Promise<unknown> {
    if (!this.#sharded) return client.unsubscribe(channels, SUBSCRIBE_TIMEOUT_MS);
    if (client.sunsubscribe === undefined) return Promise.reject(new Error(NO_SHARDED));
    return client.sunsubscribe(channels, SUBSCRIBE_TIMEOUT_MS);
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
