/**
 * What is wrong with a client `new LockClient()` (or a Redlock master) was given, said as what
 * was expected (`expected`, the caller's sentence) and what arrived (`got`, the value described
as validate.ts describes it): one wording per library
 * and problem, shared by every place that adapts a user's client.
 */
import type { ClientProblem } from './adapt.js';

export function problemMessage(expected: string, got: string, found: ClientProblem): string {
  if (!('library' in found)) return `${expected}, got ${got}`;
  if (found.library === 'node-redis') {
    switch (found.problem) {
      case 'cluster':
        return 'This node-redis Cluster client lacks what latchkey uses (`duplicate`, `sSubscribe` of node-redis 5): pass a createCluster() client of the `redis` package, v5 or later';
      case 'sentinel':
        return 'This node-redis Sentinel client lacks what latchkey uses (`use`, `subscribe`, `topology-change` events of node-redis 5): pass a createSentinel() client of the `redis` package, v5 or later';
      case 'not-open':
        return `${expected}; the node-redis client is not connected: call \`await client.connect()\` first`;
    }
  }
  if (found.library === 'glide') {
    switch (found.problem) {
      case 'closed':
        return `${expected}; the GLIDE client is closed: pass a client that is open`;
      case 'subscriber':
        return `${expected}; the GLIDE client was created with \`pubsubSubscriptions\`: pass a client created without them (latchkey opens its own subscriber)`;
      case 'unknown-version':
        return `${expected}; this GLIDE client lacks what latchkey uses (its configuration, \`createClient\` and dynamic subscriptions, \`subscribe\` and on a cluster client \`ssubscribe\`, of @valkey/valkey-glide 2.x)`;
    }
  }
  const ioredis = found.library;
  switch (found.problem) {
    case 'cluster':
      return `${ioredis} Cluster clients are not supported: got an ${ioredis} Cluster client; for a Redis Cluster pass a node-redis createCluster() client (connected) or a Valkey GLIDE GlideClusterClient, or a standalone ${ioredis} client from new Redis()`;
    case 'lazy':
      return `${expected}; the ${ioredis} client is not connected (status "wait", from \`lazyConnect\`): call \`await redis.connect()\` first`;
    case 'closed':
      return `${expected}; the ${ioredis} client is closed (status "end"): pass a client that is open`;
    case 'subscriber':
      return `${expected}; the ${ioredis} client is in subscriber or monitor mode, where it can send no other command: pass a client of its own`;
    case 'unknown-version':
      return `${expected}; this ${ioredis} client builds its commands in a way latchkey does not know (ioredis 5 and 6 and iovalkey 0.4 are supported)`;
  }
}
