/**
 * What every Redis Cluster adapter (node-redis-cluster.ts, glide-cluster.ts) routes by: a
 * command's first key, and whether the servers have sharded pub/sub.
 */

/** Sharded pub/sub (SSUBSCRIBE, SPUBLISH) came with Redis 7.0. @internal */
export const SHARDED_PUB_SUB_SINCE = '7.0.0';

/** Commands latchkey sends that name no key: they go to any master. */
const KEYLESS = new Set(['INFO', 'TIME', 'PING', 'SCRIPT', 'CLUSTER', 'ROLE', 'DBSIZE', 'MEMORY', 'LATENCY']);

/**
 * The key a command is routed by: the first key of a script, the argument after a key command;
 * undefined for a command that names no key.
 * @internal
 */
export function firstKeyOf(args: readonly string[]): string | undefined {
  const name = (args[0] ?? '').toUpperCase();
  if (name === 'EVALSHA' || name === 'EVAL' || name === 'EVALSHA_RO' || name === 'EVAL_RO') {
    return Number(args[2]) > 0 ? args[3] : undefined;
  }
  return KEYLESS.has(name) ? undefined : args[1];
}
