/**
 * Every kind on a real Redis Cluster (3 masters, 3 replicas): two LockClients, each on a cluster
 * client of its own of the library under test (node-redis `createCluster()` or GLIDE's
 * `GlideClusterClient`; LATCHKEY_TEST_CLIENT), the tests' own commands on node-redis; the waiter is woken by a sharded message
 * (SSUBSCRIBE seen by PUBSUB SHARDNUMSUB on the master of the channel's slot, none by plain
 * PUBSUB), every key a kind leaves lands in the lock key's slot, a Redisson-style waiter and
 * publisher on the same cluster wake and are woken by latchkey, and the watchdog renews holds in
 * many slots at once. Skips on ioredis and iovalkey, whose Cluster clients latchkey refuses.
 */
import { afterAll, beforeAll, describe as describeAll, expect, it } from 'vitest';
import { GlideClusterClient, GlideClusterClientConfiguration } from '@valkey/valkey-glide';
import { InvalidArgumentError, LockClient, RedlockClient, ReplicationError } from '../../src/index.js';
import { adapt, isConnection } from '../../src/redis/adapt.js';
import { keySlot } from '../../src/redis/slot.js';
import { cannot } from '../support/clients.js';
import { connectCluster, startCluster, type LocalCluster } from '../support/cluster.js';
import {
  connectLockCluster,
  destroyLockCluster,
  reportingVersion,
  type LockClusterClient,
} from '../support/cluster-clients.js';
import { sleep, waitUntil } from '../support/wait.js';

type Cluster = Awaited<ReturnType<typeof connectCluster>>;

const skipped = cannot('cluster');
const describe = describeAll.skipIf(skipped !== undefined);

let cluster: LocalCluster;
/** The tests' own commands. */
let redisA: Cluster;
/** The LockClients' connections, of the library under test. */
let lockA: LockClusterClient;
let lockB: LockClusterClient;
let a: LockClient;
let b: LockClient;
let run = 0;

beforeAll(async () => {
  if (skipped !== undefined) return;
  cluster = await startCluster();
  redisA = await connectCluster(cluster);
  lockA = await connectLockCluster(cluster);
  lockB = await connectLockCluster(cluster);
  a = new LockClient(lockA);
  b = new LockClient(lockB);
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  redisA?.destroy();
  for (const client of [lockA, lockB]) if (client !== undefined) destroyLockCluster(client);
  await cluster?.stop();
});

/** Shard channels with `fragment` in their name that someone listens to, on their slot's master. */
async function shardChannels(fragment: string): Promise<string[]> {
  const found: string[] = [];
  const { masters } = await cluster.roles();
  for (const port of masters) {
    const names = (await cluster.command(port, ['PUBSUB', 'SHARDCHANNELS', `*${fragment}*`])) as string[];
    for (const name of names) {
      // Only the master of the channel's slot lists it.
      expect(await cluster.masterOf(keySlot(name))).toBe(port);
      found.push(name);
    }
  }
  return found;
}

/** Plain (not sharded) channels with `fragment` in their name, on any node. */
async function plainChannels(fragment: string): Promise<string[]> {
  const found: string[] = [];
  for (const node of cluster.nodes) {
    found.push(...((await cluster.command(node.port, ['PUBSUB', 'CHANNELS', `*${fragment}*`])) as string[]));
  }
  return found;
}

/** Every key with `fragment` in its name, on every master. */
async function keysWith(fragment: string): Promise<string[]> {
  const { masters } = await cluster.roles();
  const keys: string[] = [];
  for (const port of masters)
    keys.push(...((await cluster.command(port, ['KEYS', `*${fragment}*`])) as string[]));
  return keys;
}

interface KindCase {
  readonly kind: string;
  /** Takes the lock (or what stands for it) on A; resolves with what frees it. */
  readonly hold: (name: string) => Promise<() => Promise<unknown>>;
  /** Waits on B until freed; resolves with what B must give back, if anything. */
  readonly wait: (name: string) => Promise<() => Promise<unknown>>;
}

const nothing = (): Promise<void> => Promise.resolve();

const KINDS: readonly KindCase[] = [
  {
    kind: 'lock',
    hold: async (name) => {
      const lease = await a.lock(name).acquire();
      return () => lease.release();
    },
    wait: async (name) => {
      const lease = await b.lock(name).acquire({ waitMs: 10_000 });
      return () => lease.release();
    },
  },
  {
    kind: 'fenced lock',
    hold: async (name) => {
      const lease = await a.fencedLock(name).acquire();
      return () => lease.release();
    },
    wait: async (name) => {
      const lease = await b.fencedLock(name).acquire({ waitMs: 10_000 });
      expect(lease.token).toBeGreaterThan(1n);
      return () => lease.release();
    },
  },
  {
    kind: 'simple lock',
    hold: async (name) => {
      const lease = await a.simpleLock(name).acquire();
      return () => lease.release();
    },
    wait: async (name) => {
      const lease = await b.simpleLock(name).acquire({ waitMs: 10_000 });
      return () => lease.release();
    },
  },
  {
    kind: 'fair lock',
    hold: async (name) => {
      const lease = await a.fairLock(name).acquire();
      return () => lease.release();
    },
    wait: async (name) => {
      const lease = await b.fairLock(name).acquire({ waitMs: 10_000 });
      return () => lease.release();
    },
  },
  {
    kind: 'read-write lock',
    hold: async (name) => {
      const lease = await a.readWriteLock(name).writeLock().acquire();
      return () => lease.release();
    },
    wait: async (name) => {
      // Two read holds: two reader lease keys, which the scripts name themselves.
      const read = b.readWriteLock(name).readLock();
      const first = await read.acquire({ waitMs: 10_000 });
      const second = await read.acquire();
      return async () => {
        await second.release();
        await first.release();
      };
    },
  },
  {
    kind: 'semaphore',
    hold: async (name) => {
      const semaphore = a.semaphore(name, { permits: 1 });
      await semaphore.acquire();
      return () => semaphore.release();
    },
    wait: async (name) => {
      const semaphore = b.semaphore(name, { permits: 1 });
      await semaphore.acquire({ waitMs: 10_000 });
      return () => semaphore.release();
    },
  },
  {
    kind: 'permit semaphore',
    hold: async (name) => {
      const lease = await a.permitSemaphore(name, { permits: 1 }).acquire();
      return () => lease.release();
    },
    wait: async (name) => {
      const lease = await b.permitSemaphore(name, { permits: 1 }).acquire({ waitMs: 10_000 });
      return () => lease.release();
    },
  },
  {
    kind: 'count-down latch',
    hold: async (name) => {
      const latch = a.countDownLatch(name);
      expect(await latch.trySetCount(1)).toBe(true);
      return () => latch.countDown();
    },
    wait: async (name) => {
      expect(await b.countDownLatch(name).await({ waitMs: 10_000 })).toBe(true);
      return nothing;
    },
  },
];

describe.each([
  ['a plain name', (kind: string) => `orders-${kind.replaceAll(' ', '-')}-${(run += 1)}x`],
  ['a hash-tagged name', (kind: string) => `{orders}:${kind.replaceAll(' ', '-')}-${(run += 1)}x`],
])('every kind on a cluster, with %s', (_label, nameOf) => {
  it.each(KINDS)(
    '$kind: B waits, is woken by a sharded message when A frees it; every key in one slot',
    async ({ kind, hold, wait }) => {
      const name = nameOf(kind);
      // Redis's glob takes braces as they are.
      const fragment = name;
      const free = await hold(name);
      const waiting = wait(name);
      waiting.catch(() => undefined);
      // B listens on its shard (SSUBSCRIBE), not with a plain SUBSCRIBE.
      await waitUntil('B listens on a shard channel', async () => (await shardChannels(fragment)).length > 0);
      expect(await plainChannels(fragment)).toEqual([]);
      // The channel shares the lock's slot: a script on the lock's node publishes to it.
      for (const channel of await shardChannels(fragment)) expect(keySlot(channel)).toBe(keySlot(name));
      const freedAt = performance.now();
      await free();
      const giveBack = await waiting;
      // Woken by the message, far before any lease (30 s) could have run out.
      expect(performance.now() - freedAt).toBeLessThan(2_000);

      const keys = await keysWith(fragment);
      expect(keys.length).toBeGreaterThan(0);
      const slot = keySlot(name);
      for (const key of keys) expect({ key, slot: keySlot(key) }).toEqual({ key, slot });
      if (kind === 'read-write lock')
        expect(keys.filter((key) => key.includes(':rwlock_timeout:'))).toHaveLength(2);
      await giveBack();
    },
  );
});

describe('Redisson-style clients on the same cluster', () => {
  it('a raw SSUBSCRIBE on redisson_lock__channel:{name} hears latchkey free the lock', async () => {
    const name = `invoice-${(run += 1)}`;
    const listener = await connectCluster(cluster);
    try {
      const heard: string[] = [];
      await listener.sSubscribe(`redisson_lock__channel:{${name}}`, (message) => heard.push(message));
      const lease = await a.lock(name).acquire();
      await lease.release();
      await waitUntil('the raw listener heard the release', () => heard.length > 0, 2_000);
      expect(heard).toEqual(['0']);
    } finally {
      listener.destroy();
    }
  });

  it('a latchkey waiter is woken by a Redisson-style SPUBLISH after the hash is deleted', async () => {
    const name = `invoice-${(run += 1)}`;
    // A Redisson holder: its hash `<uuid>:<thread> -> 1`, with a long lease.
    await redisA.hSet(name, 'c0ffee00-0000-4000-8000-000000000000:1', '1');
    await redisA.pExpire(name, 60_000);
    const waiting = b.lock(name).acquire({ waitMs: 10_000 });
    waiting.catch(() => undefined);
    await waitUntil('B listens on a shard channel', async () => (await shardChannels(name)).length > 0);
    const freedAt = performance.now();
    await redisA.del(name);
    await redisA.sendCommand(name, false, ['SPUBLISH', `redisson_lock__channel:{${name}}`, '0']);
    const lease = await waiting;
    expect(performance.now() - freedAt).toBeLessThan(2_000);
    await lease.release();
  });
});

describe('hand-over on a cluster', () => {
  it('a queue entry whose grant channel lies in another slot is skipped, and the release still wakes waiters', async () => {
    const name = `invoice-${(run += 1)}x`;
    const lease = await a.lock(name).acquire();
    // An entry as one server's waiters leave them: its client's grant channel has no hash tag.
    // One served by another master, where the lock's node refuses to publish (a non-local key).
    const home = await cluster.masterOf(keySlot(name));
    let grant = '';
    for (let i = 0; grant === ''; i += 1) {
      const candidate = `latchkey_grant:${i.toString(16).padStart(16, '0')}`;
      if ((await cluster.masterOf(keySlot(candidate))) !== home) grant = candidate;
    }
    await redisA.rPush(
      `latchkey_queue:{${name}}`,
      `t1 30000 ${grant} c0ffee00-0000-4000-8000-000000000000:1`,
    );
    const waiting = b.lock(name).acquire({ waitMs: 10_000 });
    waiting.catch(() => undefined);
    await waitUntil('B listens on a shard channel', async () => (await shardChannels(name)).length > 0);
    const freedAt = performance.now();
    await lease.release();
    const taken = await waiting;
    expect(performance.now() - freedAt).toBeLessThan(2_000);
    // Nobody was handed the lock: the entry is gone and B holds it alone.
    expect(await redisA.lLen(`latchkey_queue:{${name}}`)).toBe(0);
    expect(Object.keys(await redisA.hGetAll(name))).toHaveLength(1);
    await taken.release();
  });
});

describe('a cluster before Redis 7', () => {
  it('uses plain PUBLISH and SUBSCRIBE when the server reports a version without sharded pub/sub', async () => {
    // The same cluster, reported as Redis 6.2 by a client that rewrites INFO's version.
    const [redisC, redisD] = [await connectLockCluster(cluster), await connectLockCluster(cluster)];
    const [c, d] = [
      new LockClient(reportingVersion(redisC, '6.2.14')),
      new LockClient(reportingVersion(redisD, '6.2.14')),
    ];
    try {
      const name = `invoice-${(run += 1)}x`;
      const lease = await c.lock(name).acquire();
      const waiting = d.lock(name).acquire({ waitMs: 10_000 });
      waiting.catch(() => undefined);
      await waitUntil('D listens on a plain channel', async () => (await plainChannels(name)).length > 0);
      expect(await shardChannels(name)).toEqual([]);
      const freedAt = performance.now();
      await lease.release();
      const taken = await waiting;
      expect(performance.now() - freedAt).toBeLessThan(2_000);
      await taken.release();
    } finally {
      await Promise.all([c.close(), d.close()]);
      destroyLockCluster(redisC);
      destroyLockCluster(redisD);
    }
  });
});

describe('the watchdog on a cluster', () => {
  it('renews 120 holds spread over many slots, batch by slot, without a CROSSSLOT error', async () => {
    const redis = await connectLockCluster(cluster);
    // A lease of 1 s, renewed every third: with 300 ms, taking 120 locks and a loaded machine's
    // stalls (load 13) lost holds before any renewal could reach them.
    const locks = new LockClient(redis, { watchdogTimeoutMs: 1_000 });
    const failures: unknown[] = [];
    locks.on('renewFailed', (event) => failures.push(event));
    locks.on('lockLost', (event) => failures.push(event));
    try {
      const names = Array.from({ length: 120 }, (_, i) => `renewed-${(run += 1)}-${i}`);
      expect(new Set(names.map((name) => keySlot(name))).size).toBeGreaterThan(100);
      const leases = await Promise.all(names.map((name) => locks.lock(name).acquire()));
      const readers = await Promise.all(
        names.slice(0, 20).map((name) => locks.readWriteLock(`${name}-rw`).readLock().acquire()),
      );
      // Nine renewals' worth of time: each lease (1 s) must be renewed to survive it.
      await sleep(3_000);
      expect(failures).toEqual([]);
      for (const name of names) expect(await redisA.pTTL(name)).toBeGreaterThan(0);
      for (const lease of [...leases, ...readers]) expect(lease.signal.aborted).toBe(false);
      await Promise.all([...leases, ...readers].map((lease) => lease.release()));
    } finally {
      await locks.close();
      destroyLockCluster(redis);
    }
  });
});

/** How many WAIT commands the node on `port` has run (INFO commandstats). */
async function waitCalls(port: number): Promise<number> {
  const info = String(await cluster.command(port, ['INFO', 'commandstats']));
  return Number(/cmdstat_wait:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

describe('syncReplicas on a cluster', () => {
  it("waits for the replica of the lock's own master, and rolls a grant back when too few acknowledge", async () => {
    const name = `synced-${(run += 1)}`;
    const master = await cluster.masterOf(keySlot(name));
    const redis = await connectLockCluster(cluster);
    // Each master has one replica: one acknowledgement can be had, two never.
    const one = new LockClient(redis, { syncReplicas: { count: 1, timeoutMs: 200 } });
    const two = new LockClient(redis, { syncReplicas: { count: 2, timeoutMs: 100 } });
    try {
      const waitsBefore = await waitCalls(master);
      const lease = await one.lock(name).acquire({ waitMs: 2_000 });
      // The WAIT went to the master that holds the key, and its replica acknowledged it.
      expect(await waitCalls(master)).toBeGreaterThan(waitsBefore);
      await lease.release();

      const error = await two
        .lock(name)
        .acquire({ waitMs: 400 })
        .then(
          () => undefined,
          (reason: unknown) => reason,
        );
      expect(error).toBeInstanceOf(ReplicationError);
      expect(await redisA.exists(name)).toBe(0);
    } finally {
      await one.close();
      await two.close();
      destroyLockCluster(redis);
    }
  });
});

describe('Redlock and cluster clients', () => {
  it.each([
    ['node-redis', 'node-redis'],
    ['glide', 'Valkey GLIDE'],
  ] as const)(
    'refuses a %s cluster client as a Redlock master, naming its library',
    async (library, named) => {
      const clusterClient = await connectLockCluster(cluster, library);
      try {
        const message = (() => {
          try {
            new RedlockClient([clusterClient, lockB, redisA]);
            return 'accepted';
          } catch (error) {
            return error instanceof InvalidArgumentError ? error.message : String(error);
          }
        })();
        expect(message).toMatch(
          new RegExp(`masters\\[0\\].*, got a ${named} Cluster client: Redlock needs independent masters`),
        );
      } finally {
        destroyLockCluster(clusterClient);
      }
    },
  );
});

describe("Valkey GLIDE's cluster client, whatever the library under test", () => {
  const addresses = (): Array<{ host: string; port: number }> =>
    cluster.nodes.map((node) => ({ host: '127.0.0.1', port: node.port }));

  it('is driven as a cluster client: a waiter on one is woken by a sharded message when another frees the lock', async () => {
    const [glideA, glideB] = [
      await connectLockCluster(cluster, 'glide'),
      await connectLockCluster(cluster, 'glide'),
    ];
    const adapted = adapt(glideA);
    expect(isConnection(adapted) && { library: adapted.library, cluster: adapted.cluster }).toEqual({
      library: 'glide',
      cluster: true,
    });
    const [c, d] = [new LockClient(glideA), new LockClient(glideB)];
    try {
      const name = `glide-invoice-${(run += 1)}`;
      const lease = await c.lock(name).acquire();
      const waiting = d.lock(name).acquire({ waitMs: 10_000 });
      waiting.catch(() => undefined);
      await waitUntil('D listens on a shard channel', async () => (await shardChannels(name)).length > 0);
      const freedAt = performance.now();
      await lease.release();
      const taken = await waiting;
      expect(performance.now() - freedAt).toBeLessThan(2_000);
      await taken.release();
      expect(await redisA.exists(name)).toBe(0);
    } finally {
      await Promise.all([c.close(), d.close()]);
      destroyLockCluster(glideA);
      destroyLockCluster(glideB);
    }
  });

  it('refuses a closed one, one created with subscriptions, and one without sharded subscriptions', async () => {
    const closed = await GlideClusterClient.createClient({ addresses: addresses() });
    closed.close();
    expect(() => new LockClient(closed)).toThrow(InvalidArgumentError);
    expect(() => new LockClient(closed)).toThrow(/the GLIDE client is closed/);

    const subscribed = await GlideClusterClient.createClient({
      addresses: addresses(),
      pubsubSubscriptions: {
        channelsAndPatterns: {
          [GlideClusterClientConfiguration.PubSubChannelModes.Sharded]: new Set(['{orders}:news']),
        },
      },
    });
    const open = await GlideClusterClient.createClient({ addresses: addresses() });
    try {
      expect(() => new LockClient(subscribed)).toThrow(/created with `pubsubSubscriptions`/);
      // A GLIDE before dynamic sharded subscriptions: the same client without `ssubscribe`.
      const older = new Proxy(open, {
        get: (target, property) =>
          property === 'ssubscribe' ? undefined : (Reflect.get(target, property, target) as unknown),
      });
      expect(() => new LockClient(older)).toThrow(
        /this GLIDE client lacks what latchkey uses .*`ssubscribe`/,
      );
    } finally {
      subscribed.close();
      open.close();
    }
  });
});
