/**
 * The adapter for Valkey GLIDE standalone clients (`GlideClient` of `@valkey/valkey-glide`, 2.x),
 * and what it shares with the cluster client's (glide-cluster.ts). GLIDE is never imported: a
 * client is recognised by its shape, and the subscriber connection is made by the client's own
 * class (glide-subscriber.ts).
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
 *   GLIDE's own resubscription are taken as the sign (see GlideSubscription in glide-subscriber.ts), and no connection
 *   error of the subscriber is reported (GLIDE reports none).
 */
import type {
  GlideClientLike,
  GlideClusterClientLike,
  RedisConnection,
  Subscriber,
  SubscriberEvents,
} from './connection.js';
import { flatMaps, translated } from './glide-replies.js';
import { openGlideSubscriber, type GlideClientClass } from './glide-subscriber.js';

/** Why a GLIDE client cannot be used. @internal */
export type GlideProblem = 'closed' | 'subscriber' | 'unknown-version';

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

/** Whether the GLIDE client `redis` is a `GlideClusterClient` (it alone routes scripts). @internal */
export function isGlideCluster(redis: GlideClientLike): redis is GlideClusterClientLike {
  return typeof (redis as { invokeScriptWithRoute?: unknown }).invokeScriptWithRoute === 'function';
}

/** Why the GLIDE client `redis` cannot be used, or undefined when it can. @internal */
export function glideProblem(redis: GlideClientLike): GlideProblem | undefined {
  if ((redis as { isClosed?: unknown }).isClosed === true) return 'closed';
  const config = configOf(redis);
  if (config === undefined || typeof classOf(redis)?.createClient !== 'function') return 'unknown-version';
  // The subscriber adds and removes channels as it runs (GLIDE 2.x), sharded ones on a cluster.
  const dynamic = redis as { subscribe?: unknown; ssubscribe?: unknown };
  if (typeof dynamic.subscribe !== 'function') return 'unknown-version';
  if (isGlideCluster(redis) && typeof dynamic.ssubscribe !== 'function') return 'unknown-version';
  // A client created with subscriptions gets its messages through them; latchkey's own
  // subscriber is a client of its own.
  if ((config as { pubsubSubscriptions?: unknown }).pubsubSubscriptions !== undefined) return 'subscriber';
  return undefined;
}

/** The configuration the client was created with (a field GLIDE keeps, not documented). @internal */
export function configOf(redis: GlideClientLike): object | undefined {
  const config = (redis as { config?: unknown }).config;
  return typeof config === 'object' && config !== null ? config : undefined;
}

/** The client's class, whose `createClient` makes the subscriber. @internal */
export function classOf(redis: GlideClientLike): Partial<GlideClientClass> | undefined {
  return (redis as { constructor?: Partial<GlideClientClass> }).constructor;
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

  openSubscriber(events: SubscriberEvents): Promise<Subscriber> {
    return openGlideSubscriber(
      classOf(this.#client) as GlideClientClass,
      configOf(this.#client) ?? {},
      'exact',
      events,
    );
  }
}
