/**
 * The adapter for Valkey GLIDE cluster clients (`GlideClusterClient` of `@valkey/valkey-glide`,
 * 2.x), recognised by shape as the standalone one is (glide.ts), whose errors, replies and
 * subscriber it shares.
 *
 * How it differs from node-redis's cluster client (node-redis-cluster.ts), as far as latchkey is
 * concerned:
 * - Each command names its node: `customCommand` with the route of the master of its first key's
 *   slot (`primarySlotKey`), a key-less one that of a master picked at random. Without a route
 *   GLIDE would send `INFO` or `WAIT` to every master and answer with one reply per node.
 * - GLIDE follows MOVED and ASK, and sends a command again when the server refused it without
 *   running it (TRYAGAIN, CLUSTERDOWN, READONLY) or when it could not be written at all; one
 *   whose connection dropped after it was written rejects and is not written again, as on the
 *   standalone client. There is no per-command abort.
 * - The subscriber is a second `GlideClusterClient` from the user's client's configuration, with
 *   sharded channels on Redis 7 or later (plain ones before). GLIDE's core keeps its
 *   subscriptions in step with the cluster's layout by itself: a channel whose slot moved, or
 *   whose master failed, is subscribed again on the slot's new master, which the subscriber
 *   notices from the server's confirmations (see glide-subscriber.ts). The subscriber reads the
 *   layout every second and checks its channels twice a second (see SUBSCRIBER_SETTINGS), so a
 *   failover or a slot move is followed soon even while nothing is sent.
 */
import type { GlideClusterClientLike, RedisConnection, Subscriber, SubscriberEvents } from './connection.js';
import { afterReply, firstKeyOf, SHARDED_PUB_SUB_SINCE } from './cluster-routing.js';
import { classOf, configOf } from './glide.js';
import { flatMaps, translated } from './glide-replies.js';
import { openGlideSubscriber, type GlideClientClass } from './glide-subscriber.js';
import { isAtLeast } from './server-version.js';
import { SLOT_COUNT } from './slot.js';

/**
 * The subscriber's own settings: it reads the cluster's layout every second (GLIDE's default is
 * every 60 s), and compares the channels it has with those it wants every 500 ms (GLIDE's
 * default is 3 s), so a channel whose slot moved is subscribed again on its new master soon.
 */
const SUBSCRIBER_SETTINGS = {
  periodicChecks: { duration_in_sec: 1 },
  pubsubReconciliationIntervalMs: 500,
};

/** GLIDE's route to the master that serves `key`'s slot, or to any master for no key. */
function routeOf(key: string | undefined): object {
  if (key !== undefined) return { type: 'primarySlotKey', key };
  return { type: 'primarySlotId', id: Math.floor(Math.random() * SLOT_COUNT) };
}

/**
 * The connection to a Redis Cluster through a GLIDE `GlideClusterClient` (checked by
 * `glideProblem` in glide.ts).
 * @internal
 */
export class GlideClusterConnection implements RedisConnection {
  readonly library = 'glide';
  readonly cluster = true;
  readonly #client: GlideClusterClientLike;
  #sharded = false;

  constructor(client: GlideClusterClientLike) {
    this.#client = client;
  }

  get closed(): boolean {
    return (this.#client as { isClosed?: unknown }).isClosed === true;
  }

  /** As on the standalone client: taken as written at once, never written twice (see above). */
  get sendsAtOnce(): boolean {
    return !this.closed;
  }

  get shardedPubSub(): boolean {
    return this.#sharded;
  }

  noteServerVersion(version: string): void {
    this.#sharded = isAtLeast(version, SHARDED_PUB_SUB_SINCE);
  }

  send(args: string[], signal?: AbortSignal): Promise<unknown> {
    return this.#sendTo(args, firstKeyOf(args), signal);
  }

  /**
   * A write and the `WAIT` for it, both to the master of the write's first key. The `WAIT` goes
   * out once the write's reply is in: GLIDE follows a MOVED or ASK by sending the write to
   * another node, and a `WAIT` already written to the first would count that node's replicas.
   * So on a cluster `syncReplicas` costs a second round trip.
   */
  sendPair(first: string[], second: string[], signal?: AbortSignal): [Promise<unknown>, Promise<unknown>] {
    const key = firstKeyOf(first);
    return afterReply(this.#sendTo(first, key, signal), () => this.#sendTo(second, key, signal));
  }

  openSubscriber(events: SubscriberEvents): Promise<Subscriber> {
    return openGlideSubscriber(
      classOf(this.#client) as GlideClientClass,
      configOf(this.#client) ?? {},
      this.#sharded ? 'sharded' : 'exact',
      events,
      SUBSCRIBER_SETTINGS,
    );
  }

  async #sendTo(args: string[], key: string | undefined, signal?: AbortSignal): Promise<unknown> {
    if (signal?.aborted === true) throw new Error('The command was withdrawn before it was sent');
    try {
      return flatMaps(await this.#client.customCommand(args, { route: routeOf(key) }));
    } catch (error) {
      throw translated(error);
    }
  }
}
