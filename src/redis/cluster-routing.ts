/**
 * What every Redis Cluster adapter (node-redis-cluster.ts, glide-cluster.ts) routes by: a
 * command's first key, and whether the servers have sharded pub/sub.
 */

/** Sharded pub/sub (SSUBSCRIBE, SPUBLISH) came with Redis 7.0. @internal */
export const SHARDED_PUB_SUB_SINCE = '7.0.0';

/** Commands latchkey sends that name no key: they go to any master. */
const KEYLESS = new Set(['INFO', 'TIME', 'PING', 'SCRIPT', 'CLUSTER', 'ROLE', 'DBSIZE', 'MEMORY', 'LATENCY']);

/**
 * A write's reply, and the command that waits for it (`WAIT`), sent by `sendSecond` once that
 * reply is in: a cluster client follows a MOVED or ASK by sending the write to another node,
 * and a `WAIT` already written to the first node would count that node's replicas.
 * @internal
 */
export function afterReply(
  reply: Promise<unknown>,
  sendSecond: () => Promise<unknown>,
): [Promise<unknown>, Promise<unknown>] {
  const after = reply.then(sendSecond, () => {
    throw new Error('The write was not answered, so nothing was waited for');
  });
  return [reply, after];
}

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
