/**
 * Cluster clients of the library under test (LATCHKEY_TEST_CLIENT) for the LockClients of the
 * Cluster tests: a node-redis `createCluster()` client, or a Valkey GLIDE `GlideClusterClient`.
 * latchkey refuses ioredis's and iovalkey's `Cluster`, so the Cluster tests skip on those (see
 * `cannot('cluster')`). The tests' own commands stay on node-redis cluster clients.
 */
import { GlideClusterClient } from '@valkey/valkey-glide';
import { GLIDE_REQUEST_TIMEOUT_MS, TEST_CLIENT, type TestClientLibrary } from './clients.js';
import { connectCluster, type ClusterClient, type LocalCluster } from './cluster.js';

/** A cluster client a LockClient under test runs on. */
export type LockClusterClient = ClusterClient | GlideClusterClient;

/** A connected cluster client of `library` (default: the one under test) on `cluster`. */
export async function connectLockCluster(
  cluster: LocalCluster,
  library: TestClientLibrary = TEST_CLIENT,
): Promise<LockClusterClient> {
  if (library === 'node-redis') return connectCluster(cluster);
  if (library === 'glide') {
    return GlideClusterClient.createClient({
      addresses: cluster.nodes.map((node) => ({ host: '127.0.0.1', port: node.port })),
      requestTimeout: GLIDE_REQUEST_TIMEOUT_MS,
    });
  }
  throw new Error(`latchkey refuses ${library} Cluster clients: the Cluster tests skip on ${library}`);
}

/** Closes `client` at once. */
export function destroyLockCluster(client: LockClusterClient): void {
  if (client instanceof GlideClusterClient) client.close();
  else client.destroy();
}

/**
 * `client` with the `redis_version` of its INFO replies rewritten to `version`: the same cluster,
 * as a server of that version would report itself to latchkey.
 */
export function reportingVersion<C extends LockClusterClient>(client: C, version: string): C {
  const rewrite = (args: readonly unknown[], reply: unknown): unknown =>
    args[0] === 'INFO' && typeof reply === 'string'
      ? reply.replace(/redis_version:[^\r\n]*/, `redis_version:${version}`)
      : reply;
  const name = client instanceof GlideClusterClient ? 'customCommand' : 'sendCommand';
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      // The class stays as it is: GLIDE's subscriber is made by its static createClient.
      if (property === 'constructor' || typeof value !== 'function') return value;
      const method = (value as (...args: unknown[]) => Promise<unknown>).bind(target);
      if (property !== name) return method;
      return async (...call: unknown[]) => {
        // node-redis's cluster sendCommand(firstKey, isReadonly, args), GLIDE's customCommand(args).
        const args = (name === 'sendCommand' ? call[2] : call[0]) as readonly unknown[];
        return rewrite(args, await method(...call));
      };
    },
  });
}
