import type {
  NodeRedisClusterClient,
  NodeRedisClusterSubscriber,
  RedisConnection,
  Subscriber,
  SubscriberEvents,
} from './connection.js';
import { isServerReply } from './replies.js';
import { ClusterSubscription, type NodeOfCluster } from './node-redis-cluster-subscriber.js';
import { isAtLeast } from './server-version.js';
import { afterReply, firstKeyOf, SHARDED_PUB_SUB_SINCE } from './cluster-routing.js';

/** How often at most a failed command makes node-redis learn the cluster's layout again. */
const REDISCOVER_EVERY_MS = 500;
/**
 * How often the cluster's layout is read while latchkey listens on any channel (as Redisson's
 * `scanInterval` does): a failover or a slot moved away is seen within it even by a client that
 * sends nothing meanwhile, and the subscriptions follow.
 */
const LAYOUT_SCAN_MS = 1_000;

/**
 * The connection to a Redis Cluster through a node-redis `createCluster()` client: every command
 * goes to the master of its first key's slot (node-redis follows MOVED and ASK), key-less ones
 * to any master. On Redis 7 or later, unlock messages use sharded pub/sub.
 * @internal
 */
export class NodeRedisClusterConnection implements RedisConnection {
  readonly library = 'node-redis';
  readonly cluster = true;
  readonly #client: NodeRedisClusterClient;
  #sharded = false;
  #rediscoveredAt = Number.NEGATIVE_INFINITY;
  #layout: unknown;
  readonly #subscriptions = new Set<ClusterSubscription>();
  /** Which master serves which slots, as last read by the scan; undefined before the first. */
  #scanned: string | undefined;
  #scanTimer: NodeJS.Timeout | undefined;

  constructor(client: NodeRedisClusterClient) {
    this.#client = client;
    this.#layout = client.slots;
  }

  get closed(): boolean {
    return this.#client.isOpen === false;
  }

  /**
   * A command to a node that is down waits in that node's queue: a signal lets a command that
   * timed out leave it unwritten.
   */
  get sendsAtOnce(): boolean {
    return false;
  }

  get shardedPubSub(): boolean {
    return this.#sharded;
  }

  noteServerVersion(version: string): void {
    this.#sharded = isAtLeast(version, SHARDED_PUB_SUB_SINCE);
  }

  send(args: string[], signal?: AbortSignal): Promise<unknown> {
    const reply = this.#client.sendCommand(
      firstKeyOf(args),
      false,
      args,
      signal === undefined ? undefined : { abortSignal: signal },
    );
    reply.then(
      () => this.#checkLayout(),
      (error: unknown) => {
        // A node that is down (killed, its slots failed over): node-redis keeps trying its old
        // address until a MOVED tells it otherwise, which a dead node never sends.
        if (!(error instanceof Error && isServerReply(error))) this.#rediscover();
        this.#checkLayout();
      },
    );
    return reply;
  }

  /**
   * A write and the `WAIT` for it, both to the master of the write's first key. The `WAIT` goes
   * out once the write's reply is in, not right behind it: node-redis follows a MOVED or ASK by
   * sending the write again to another node, and a `WAIT` already written to the first node
   * would then count that node's replicas, not the write's. Once the reply is in, the slot
   * table knows where the write went. So on a cluster `syncReplicas` costs a second round trip.
   */
  sendPair(first: string[], second: string[], signal?: AbortSignal): [Promise<unknown>, Promise<unknown>] {
    const key = firstKeyOf(first);
    return afterReply(this.send(first, signal), () =>
      this.#client.sendCommand(
        key,
        false,
        second,
        signal === undefined ? undefined : { abortSignal: signal },
      ),
    );
  }

  async openSubscriber(events: SubscriberEvents): Promise<Subscriber> {
    const subscription = new ClusterSubscription(
      () => this.#client.duplicate({ minimizeConnections: true }) as NodeRedisClusterSubscriber,
      this.#sharded,
      events,
      () => {
        this.#subscriptions.delete(subscription);
        if (this.#subscriptions.size === 0 && this.#scanTimer !== undefined) {
          clearTimeout(this.#scanTimer);
          this.#scanTimer = undefined;
        }
      },
    );
    await subscription.start();
    this.#subscriptions.add(subscription);
    this.#scanLater();
    return subscription;
  }

  #scanLater(): void {
    if (this.#scanTimer !== undefined || this.#subscriptions.size === 0) return;
    this.#scanTimer = setTimeout(() => {
      void this.#scan().finally(() => {
        this.#scanTimer = undefined;
        this.#scanLater();
      });
    }, LAYOUT_SCAN_MS);
    this.#scanTimer.unref();
  }

  /** Reads `CLUSTER SLOTS` from any node; a change of masters renews the subscriptions. */
  async #scan(): Promise<void> {
    // Nobody listens: nothing to follow (a later subscribe finds the slot's master by itself).
    if (this.closed || ![...this.#subscriptions].some((subscription) => subscription.listening)) return;
    let reply: unknown;
    try {
      reply = await this.#client.sendCommand(undefined, true, ['CLUSTER', 'SLOTS']);
    } catch {
      this.#rediscover();
      return;
    }
    const layout = layoutOf(reply);
    if (layout === undefined || layout === this.#scanned) return;
    const first = this.#scanned === undefined;
    this.#scanned = layout;
    if (first) return;
    this.#rediscover(true);
    for (const subscription of this.#subscriptions) subscription.renew();
  }

  /** A new slot table: slots moved or a master failed over, so the subscriptions follow. */
  #checkLayout(): void {
    const layout = this.#client.slots;
    if (layout === this.#layout) return;
    this.#layout = layout;
    for (const subscription of this.#subscriptions) subscription.renew();
  }

  /**
   * Makes node-redis read the cluster's layout again. It has no public call for it: its internal
   * one is used when present, and nothing happens otherwise (MOVED replies still update it).
   */
  #rediscover(force = false): void {
    const now = performance.now();
    if ((!force && now - this.#rediscoveredAt < REDISCOVER_EVERY_MS) || this.closed) return;
    this.#rediscoveredAt = now;
    const slots = (this.#client as { _slots?: { rediscover?: (from: unknown) => Promise<unknown> } })._slots;
    const cluster = this.#client as { masters?: readonly NodeOfCluster[] };
    const from =
      cluster.masters?.find((node) => node.client?.isReady === true)?.client ?? cluster.masters?.[0]?.client;
    if (typeof slots?.rediscover !== 'function' || from === undefined) return;
    slots
      .rediscover(from)
      .then(() => this.#checkLayout())
      .catch(() => undefined);
  }
}

/** `CLUSTER SLOTS` reduced to `<from>-<to>@<host>:<port>` of each range's master, in order. */
function layoutOf(reply: unknown): string | undefined {
  if (!Array.isArray(reply)) return undefined;
  const ranges: string[] = [];
  for (const range of reply as unknown[]) {
    if (!Array.isArray(range)) return undefined;
    const [from, to, master] = range as [unknown, unknown, unknown];
    const [host, port] = Array.isArray(master) ? (master as [unknown, unknown]) : [undefined, undefined];
    ranges.push(`${String(from)}-${String(to)}@${String(host)}:${String(port)}`);
  }
  return ranges.sort().join(',');
}
