/**
 * MultiLock on a real Redis Cluster (3 masters, 3 replicas), two LockClients each on a
 * node-redis `createCluster()` client of its own: members whose keys lie in several slots on
 * several masters, taken by both clients in opposite orders without deadlock and one at a time;
 * all or nothing across slots when a member stays held; a waiter woken by a member's sharded
 * release; members sharing one hash tag, all in one slot, taken in one round trip (measured
 * through proxies that delay every packet to every node).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCluster } from 'redis';
import { LockClient, LockTimeoutError } from '../../src/index.js';
import { keySlot } from '../../src/redis/slot.js';
import { findOverlaps, type Interval } from '../chaos/intervals.js';
import { connectCluster, startCluster, type LocalCluster } from '../support/cluster.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { sleep, within } from '../support/wait.js';

type Cluster = Awaited<ReturnType<typeof connectCluster>>;

let cluster: LocalCluster;
let redisA: Cluster;
let redisB: Cluster;
let a: LockClient;
let b: LockClient;

beforeAll(async () => {
  cluster = await startCluster();
  redisA = await connectCluster(cluster);
  redisB = await connectCluster(cluster);
  const keyPrefix = uniquePrefix('multi-cluster');
  a = new LockClient(redisA, { keyPrefix });
  b = new LockClient(redisB, { keyPrefix });
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  redisA?.destroy();
  redisB?.destroy();
  await cluster?.stop();
});

/** How many of `keys` exist, each asked of its own slot's master. */
async function existing(keys: readonly string[]): Promise<number> {
  let count = 0;
  for (const key of keys) count += await redisA.exists(key);
  return count;
}

/** Names whose keys lie on at least two masters (and in as many slots as names). */
async function spreadNames(base: string, count: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `${base}:${i}`);
  const slots = names.map((name) => keySlot(a.lock(name).key));
  expect(new Set(slots).size).toBe(count);
  const masters = new Set(await Promise.all(slots.map((slot) => cluster.masterOf(slot))));
  expect(masters.size).toBeGreaterThanOrEqual(2);
  return names;
}

describe('MultiLock on Redis Cluster', () => {
  it('takes members in several slots in opposite orders from two clients, one at a time, without deadlock', async () => {
    const names = await spreadNames('warehouse', 4);
    const sections: Interval[] = [];
    async function run(locks: LockClient, order: readonly string[], who: string): Promise<void> {
      const multi = locks.multiLock(order.map((name) => locks.lock(name)));
      for (let i = 0; i < 10; i += 1) {
        await multi.withLock(async () => {
          const start = process.hrtime.bigint();
          await sleep(2);
          sections.push({ start, end: process.hrtime.bigint(), who: `${who} #${i}` });
        });
      }
    }
    await within(
      Promise.all([run(a, names, 'a'), run(b, [...names].reverse(), 'b')]),
      25_000,
      'two multi-locks in opposite orders on a cluster',
    );
    expect(sections).toHaveLength(20);
    expect(findOverlaps(sections)).toBe(0);
    expect(await existing(names.map((name) => a.lock(name).key))).toBe(0);
  });

  it('holds no member in any slot when one stays held, and is woken by its sharded release', async () => {
    const names = await spreadNames('dock', 3);
    const [first, middle, last] = names as [string, string, string];
    const blocker = await b.lock(middle).acquire();
    const multi = a.multiLock(names.map((name) => a.lock(name)));
    const others = [a.lock(first).key, a.lock(last).key];

    const error = await multi.acquire({ waitMs: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(await existing(others)).toBe(0);
    expect(await multi.tryAcquire()).toBeNull();
    expect(await existing(others)).toBe(0);

    const acquiring = multi.acquire({ waitMs: 20_000 });
    await sleep(300);
    const releasedAt = performance.now();
    await blocker.release();
    const lease = await acquiring;
    // Woken by the release's message, not by the holder's 30 s lease.
    expect(performance.now() - releasedAt).toBeLessThan(5_000);
    expect(await existing(names.map((name) => a.lock(name).key))).toBe(3);
    await lease.release();
    expect(await existing(names.map((name) => a.lock(name).key))).toBe(0);
  });

  it('takes members that share a hash tag, all in one slot', async () => {
    const handles = [
      a.lock('{order:7}:payment'),
      a.fencedLock('{order:7}:stock'),
      a.fairLock('{order:7}:label'),
    ];
    expect(new Set(handles.map((handle) => keySlot(handle.key))).size).toBe(1);
    const lease = await a.multiLock(handles).acquire({ waitMs: 5_000 });
    expect(await b.multiLock([b.lock('{order:7}:payment')]).tryAcquire()).toBeNull();
    expect(await existing(handles.map((handle) => handle.key))).toBe(3);
    await lease.release();
    expect(await existing(handles.map((handle) => handle.key))).toBe(0);
  });

  it('takes free members that share a hash tag in one round trip', async () => {
    // A proxy in front of every node; the cluster client reaches each node through its proxy.
    const proxies = new Map<string, FaultProxy>();
    for (const node of cluster.nodes) {
      proxies.set(
        `127.0.0.1:${node.port}`,
        await startFaultProxy({ targetHost: '127.0.0.1', targetPort: node.port }),
      );
    }
    const first = [...proxies.values()][0] as FaultProxy;
    const redis = createCluster({
      rootNodes: [{ url: first.url }],
      nodeAddressMap: (address) => {
        const proxy = proxies.get(address);
        return proxy === undefined ? undefined : { host: proxy.host, port: proxy.port };
      },
      defaults: { socket: { connectTimeout: 2_000 } },
    });
    redis.on('error', () => {});
    await redis.connect();
    const locks = new LockClient(redis, { keyPrefix: uniquePrefix('multi-cluster-rtt') });
    try {
      const names = ['payment', 'stock', 'label', 'invoice'].map((part) => `{order:8}:${part}`);
      // Past the server check, with the scripts cached and the slot's node connected.
      await (await locks.multiLock(names.map((name) => locks.lock(name))).acquire()).release();
      const rttMs = 2 * 250;
      for (const proxy of proxies.values()) proxy.setLatency(250);
      const startedAt = performance.now();
      const lease = await locks.multiLock(names.map((name) => locks.lock(name))).acquire();
      const tookMs = performance.now() - startedAt;
      // One round trip: four in turn would take four times as long.
      expect(tookMs).toBeGreaterThanOrEqual(rttMs - 10);
      expect(tookMs).toBeLessThan(2 * rttMs);
      for (const proxy of proxies.values()) proxy.setLatency(0);
      await lease.release();
    } finally {
      await locks.close();
      redis.destroy();
      await Promise.all([...proxies.values()].map((proxy) => proxy.close()));
    }
  });
});
