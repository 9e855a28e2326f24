import type { RedisConnection } from './connection.js';
import { GlideConnection, glideProblem, isGlide, isGlideCluster } from './glide.js';
import { GlideClusterConnection } from './glide-cluster.js';
import { commandClass, IoRedisConnection, ioRedisLibrary, ioRedisProblem, isIoRedis } from './ioredis.js';
import { isNodeRedisCluster, NodeRedisConnection, nodeRedisProblem } from './node-redis.js';
import type { NodeRedisClusterClient } from './connection.js';
import { NodeRedisClusterConnection } from './node-redis-cluster.js';
import { isNodeRedisSentinel, NodeRedisSentinelConnection } from './node-redis-sentinel.js';

/** Why a value cannot be used as latchkey's client, and of which library it seems to be. @internal */
export type ClientProblem =
  | { readonly problem: 'not-a-client' }
  | {
      readonly library: 'node-redis';
      readonly problem: 'cluster' | 'sentinel' | 'not-open';
    }
  | {
      /** iovalkey is the Valkey fork of ioredis, recognised and driven as ioredis is. */
      readonly library: 'ioredis' | 'iovalkey';
      readonly problem: 'cluster' | 'lazy' | 'closed' | 'subscriber' | 'unknown-version';
      readonly status: string;
    }
  | {
      readonly library: 'glide';
      readonly problem: 'closed' | 'subscriber' | 'unknown-version';
    };

/**
 * The connection for the user's client, whichever library it comes from (recognised by shape,
 * never by importing the library), or why it cannot be used. Sends nothing.
 * @internal
 */
export function adapt(redis: unknown): RedisConnection | ClientProblem {
  // An ioredis client has node-redis's two methods too, so it is looked for first.
  if (isIoRedis(redis)) {
    const library = ioRedisLibrary(redis);
    const problem = ioRedisProblem(redis);
    if (problem !== undefined) return { library, problem, status: redis.status };
    const Command = commandClass(redis);
    if (Command === undefined) return { library, problem: 'unknown-version', status: redis.status };
    return new IoRedisConnection(redis, Command, library);
  }
  if (isGlide(redis)) {
    const problem = glideProblem(redis);
    if (problem !== undefined) return { library: 'glide', problem };
    return isGlideCluster(redis) ? new GlideClusterConnection(redis) : new GlideConnection(redis);
  }
  if (isNodeRedisCluster(redis)) {
    const cluster = redis as NodeRedisClusterClient;
    if (cluster.isOpen === false) return { library: 'node-redis', problem: 'not-open' };
    return new NodeRedisClusterConnection(cluster);
  }
  if (isNodeRedisSentinel(redis)) {
    if (redis.isOpen === false) return { library: 'node-redis', problem: 'not-open' };
    return new NodeRedisSentinelConnection(redis);
  }
  const problem = nodeRedisProblem(redis);
  if (problem === 'not-a-client') return { problem };
  if (problem !== undefined) return { library: 'node-redis', problem };
  return new NodeRedisConnection(redis as ConstructorParameters<typeof NodeRedisConnection>[0]);
}

/** Whether {@link adapt} found a connection. @internal */
export function isConnection(adapted: RedisConnection | ClientProblem): adapted is RedisConnection {
  return !('problem' in adapted);
}
