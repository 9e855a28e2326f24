/**
 * Faults of a real Redis Cluster under contention: several LockClients, each on a cluster client
 * of its own of the library under test (node-redis or GLIDE; skipped on ioredis and iovalkey), take and free locks of five kinds (lock, fenced, fair, write,
 * simple) whose slots live on the master under attack,
 * while (1) a replica takes over with CLUSTER FAILOVER, (2) the master is killed with SIGKILL and
 * its replica is elected, (3) the locks' slots are migrated to another master and back
 * (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE). Mutual exclusion is checked on
 * the critical sections' monotonic intervals: 0 overlaps. Waiters must recover: every lock is
 * taken again after each fault. LATCHKEY_CHAOS=full runs longer and repeats the faults.
 */
import { afterAll, beforeAll, describe as describeAll, expect, it } from 'vitest';
import { LockClient } from '../../src/index.js';
import { keySlot } from '../../src/redis/slot.js';
import { cannot } from '../support/clients.js';
import { startCluster, type LocalCluster } from '../support/cluster.js';
import {
  connectLockCluster,
  destroyLockCluster,
  type LockClusterClient,
} from '../support/cluster-clients.js';
import { sleep, waitUntil } from '../support/wait.js';
import { findOverlaps, type Interval } from './intervals.js';
import { scaled } from './scale.js';

const skipped = cannot('cluster');
const describe = describeAll.skipIf(skipped !== undefined);

/** The kinds the load takes, one per lock name in turn: each needs mutual exclusion. */
const KINDS = ['lock', 'fenced lock', 'fair lock', 'write lock', 'simple lock'] as const;
type Kind = (typeof KINDS)[number];

/** Takes `name` as `kind`; the fencing token too for a fenced lock. */
async function take(
  locks: LockClient,
  kind: Kind,
  name: string,
): Promise<{ release(): Promise<unknown>; token?: bigint }> {
  const options = { waitMs: 3_000 };
  switch (kind) {
    case 'lock':
      return locks.lock(name).acquire(options);
    case 'fenced lock':
      return locks.fencedLock(name).acquire(options);
    case 'fair lock':
      return locks.fairLock(name).acquire(options);
    case 'write lock':
      return locks.readWriteLock(name).writeLock().acquire(options);
    case 'simple lock':
      return locks.simpleLock(name).acquire(options);
  }
}

const CLIENTS = 4;
const LOOPS_PER_CLIENT = 2;
const ROUNDS = scaled(1, 4);

let cluster: LocalCluster;

beforeAll(async () => {
  if (skipped !== undefined) return;
  cluster = await startCluster();
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

/** `count` lock names whose slots the master on `port` serves now. */
async function namesOn(port: number, count: number, tag: string): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; names.length < count && i < 10_000; i += 1) {
    const name = `ledger-${tag}-${i}`;
    if ((await cluster.masterOf(keySlot(name))) === port) names.push(name);
  }
  return names;
}

interface Load {
  /** Critical sections per lock name. */
  readonly intervals: Map<string, Interval[]>;
  /** Per lock name: the last time (performance.now()) it was taken. */
  readonly lastTaken: Map<string, number>;
  /** Fencing tokens of the fenced lock, in the order its sections started. */
  readonly tokens: Array<{ start: bigint; token: bigint }>;
  acquired: number;
  failed: number;
  stop(): Promise<void>;
}

/** CLIENTS LockClients, each running LOOPS_PER_CLIENT loops of take / short section / free over `names`. */
async function startLoad(names: readonly string[]): Promise<Load> {
  const redis: LockClusterClient[] = [];
  const clients: LockClient[] = [];
  for (let i = 0; i < CLIENTS; i += 1) {
    const connection = await connectLockCluster(cluster);
    redis.push(connection);
    const locks = new LockClient(connection, { commandTimeoutMs: 1_000, watchdogTimeoutMs: 3_000 });
    locks.on('error', () => {});
    clients.push(locks);
  }
  let running = true;
  const load: Load = {
    intervals: new Map(names.map((name) => [name, []])),
    lastTaken: new Map(),
    tokens: [],
    acquired: 0,
    failed: 0,
    stop: async () => {
      running = false;
      await Promise.all(loops);
      await Promise.all(clients.map((locks) => locks.close()));
      for (const connection of redis) destroyLockCluster(connection);
    },
  };
  const loop = async (locks: LockClient, who: string, offset: number): Promise<void> => {
    for (let n = offset; running; n += 1) {
      const index = n % names.length;
      const name = names[index] as string;
      const kind = KINDS[index % KINDS.length] as Kind;
      let lease;
      try {
        lease = await take(locks, kind, name);
      } catch {
        load.failed += 1;
        await sleep(20);
        continue;
      }
      const start = process.hrtime.bigint();
      if (lease.token !== undefined) load.tokens.push({ start, token: lease.token });
      await sleep(1 + Math.random() * 4);
      const end = process.hrtime.bigint();
      load.intervals.get(name)?.push({ start, end, who: `${who} #${n}` });
      load.acquired += 1;
      load.lastTaken.set(name, performance.now());
      try {
        await lease.release();
      } catch {
        // Unconfirmed release (a node down): the lease ends by itself.
      }
    }
  };
  const loops = clients.flatMap((locks, c) =>
    Array.from({ length: LOOPS_PER_CLIENT }, (_, l) => loop(locks, `client ${c} loop ${l}`, c + l)),
  );
  return load;
}

/** Overlapping critical sections of one lock, over all locks. */
function overlaps(load: Load): number {
  let count = 0;
  for (const intervals of load.intervals.values()) count += findOverlaps(intervals);
  return count;
}

/** Fencing tokens that did not grow from one section to the next (by start). */
function tokensBack(load: Load): number {
  const sorted = [...load.tokens].sort((x, y) => (x.start < y.start ? -1 : x.start > y.start ? 1 : 0));
  let back = 0;
  for (let i = 1; i < sorted.length; i += 1) {
    if ((sorted[i]?.token ?? 0n) <= (sorted[i - 1]?.token ?? 0n)) back += 1;
  }
  return back;
}

/** Waits until every name was taken after `since`: the waiters recovered. */
async function recovered(load: Load, names: readonly string[], since: number): Promise<void> {
  await waitUntil(
    'every lock was taken again after the fault',
    () => names.every((name) => (load.lastTaken.get(name) ?? 0) > since),
    15_000,
  );
}

/**
 * A waiter subscribed before a fault: A holds `name` (watchdog lease, 30 s), B waits for it. After
 * the fault, A frees it: B must be woken by the unlock message on the shard that serves the slot
 * now, long before A's lease could have run out. Resolves how long B took after the release.
 */
async function waiterAcrossFault(name: string): Promise<{ finish(): Promise<number> }> {
  const connections = [await connectLockCluster(cluster), await connectLockCluster(cluster)];
  const [holder, waiter] = connections.map((redis) => {
    const locks = new LockClient(redis, { commandTimeoutMs: 1_000 });
    locks.on('error', () => {});
    return locks;
  }) as [LockClient, LockClient];
  const lease = await holder.lock(name).acquire();
  // Past every fault of the test, however long the full run makes it.
  const waiting = waiter.lock(name).acquire({ waitMs: 300_000 });
  waiting.catch(() => undefined);
  await waitUntil('B listens', async () => {
    const master = await cluster.masterOf(keySlot(name));
    const reply = (await cluster.command(master, [
      'PUBSUB',
      'SHARDNUMSUB',
      `redisson_lock__channel:{${name}}`,
    ])) as [string, number];
    return Number(reply[1]) > 0;
  });
  return {
    async finish() {
      try {
        await sleep(300);
        const freedAt = performance.now();
        await lease.release();
        const taken = await waiting;
        const ms = performance.now() - freedAt;
        await taken.release();
        return ms;
      } finally {
        await Promise.all([holder.close(), waiter.close()]);
        for (const redis of connections) destroyLockCluster(redis);
      }
    },
  };
}

async function nodeId(port: number): Promise<string> {
  return String(await cluster.command(port, ['CLUSTER', 'MYID']));
}

/** The replica of the master on `port`. */
async function replicaOf(port: number): Promise<number> {
  const id = await nodeId(port);
  const { replicas } = await cluster.roles();
  for (const replica of replicas) {
    const info = String(await cluster.command(replica, ['INFO', 'replication']));
    if (info.includes(`master_port:${port}`) && info.includes('master_link_status:up')) return replica;
  }
  throw new Error(`no replica of ${port} (${id})`);
}

/** Moves `slot` from the master on `from` to the master on `to`, keys and all, as redis-cli does. */
async function migrateSlot(slot: number, from: number, to: number): Promise<void> {
  const [fromId, toId] = [await nodeId(from), await nodeId(to)];
  await cluster.command(to, ['CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId]);
  await cluster.command(from, ['CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId]);
  for (;;) {
    const keys = (await cluster.command(from, [
      'CLUSTER',
      'GETKEYSINSLOT',
      String(slot),
      '1000',
    ])) as string[];
    if (keys.length === 0) break;
    await cluster.command(from, ['MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', ...keys]);
    // Under load, one key at a time now and then lets commands meet ASK and TRYAGAIN.
    await sleep(5);
  }
  const { masters } = await cluster.roles();
  for (const port of [to, from, ...masters.filter((p) => p !== to && p !== from)]) {
    await cluster.command(port, ['CLUSTER', 'SETSLOT', String(slot), 'NODE', toId]);
  }
}

describe('a Redis Cluster under faults, with contending LockClients', () => {
  it("CLUSTER FAILOVER of the locks' master: 0 overlaps, waiters recover", async () => {
    const { masters } = await cluster.roles();
    const victim = masters[0] as number;
    const names = await namesOn(victim, KINDS.length + 1, 'failover');
    const across = await waiterAcrossFault(names.pop() as string);
    const load = await startLoad(names);
    try {
      for (let round = 0; round < ROUNDS; round += 1) {
        await sleep(1_000);
        const master = await cluster.masterOf(keySlot(names[0] as string));
        const replica = await replicaOf(master);
        await cluster.command(replica, ['CLUSTER', 'FAILOVER']);
        await waitUntil(
          'the replica took over',
          async () => (await cluster.masterOf(keySlot(names[0] as string))) === replica,
          15_000,
        );
        await cluster.waitHealthy();
        await recovered(load, names, performance.now());
      }
      await sleep(500);
    } finally {
      await load.stop();
    }
    const wokenMs = await across.finish();
    console.log(
      `${expect.getState().currentTestName}: a waiter subscribed before the fault woken ${Math.round(wokenMs)} ms after the release`,
    );
    expect(wokenMs).toBeLessThan(2_000);
    console.log(
      `${expect.getState().currentTestName}: ${load.acquired} sections, ${load.failed} acquires gave up, ${overlaps(load)} overlaps, ${tokensBack(load)} fencing tokens not growing`,
    );
    expect(load.acquired).toBeGreaterThan(50);
    expect(overlaps(load)).toBe(0);
    expect(load.tokens.length).toBeGreaterThan(5);
    expect(tokensBack(load)).toBe(0);
  }, 300_000);

  it("the locks' master killed with SIGKILL: its replica is elected, 0 overlaps, waiters recover", async () => {
    const { masters } = await cluster.roles();
    const victim = masters[1] as number;
    const names = await namesOn(victim, KINDS.length + 1, 'killed');
    const across = await waiterAcrossFault(names.pop() as string);
    const load = await startLoad(names);
    try {
      for (let round = 0; round < ROUNDS; round += 1) {
        await sleep(1_000);
        const master = await cluster.masterOf(keySlot(names[0] as string));
        const replica = await replicaOf(master);
        const node = cluster.nodes.find((n) => n.port === master);
        if (node === undefined) throw new Error('unknown master');
        await node.kill();
        const killedAt = performance.now();
        await waitUntil(
          'the replica was elected',
          async () => (await cluster.masterOf(keySlot(names[0] as string))) === replica,
          20_000,
        );
        await recovered(load, names, performance.now());
        console.log(
          `round ${round}: locks taken again ${Math.round(performance.now() - killedAt)} ms after the kill`,
        );
        // Back as a replica of the new master, so the next round (and test) has one.
        await node.restart();
        await cluster.waitHealthy();
        await waitUntil(
          'the restarted node syncs',
          async () => {
            const info = String(await cluster.command(master, ['INFO', 'replication']));
            return info.includes('role:slave') && info.includes('master_link_status:up');
          },
          20_000,
        );
      }
      await sleep(500);
    } finally {
      await load.stop();
    }
    const wokenMs = await across.finish();
    console.log(
      `${expect.getState().currentTestName}: a waiter subscribed before the fault woken ${Math.round(wokenMs)} ms after the release`,
    );
    expect(wokenMs).toBeLessThan(2_000);
    console.log(
      `${expect.getState().currentTestName}: ${load.acquired} sections, ${load.failed} acquires gave up, ${overlaps(load)} overlaps, ${tokensBack(load)} fencing tokens not growing`,
    );
    expect(load.acquired).toBeGreaterThan(50);
    expect(overlaps(load)).toBe(0);
    expect(load.tokens.length).toBeGreaterThan(5);
    expect(tokensBack(load)).toBe(0);
  }, 300_000);

  it("the locks' slots migrated to another master and back under load: 0 overlaps, waiters recover", async () => {
    const { masters } = await cluster.roles();
    const [home, away] = masters as [number, number];
    const names = await namesOn(home, KINDS.length + 1, 'moved');
    const slots = [...new Set(names.map((name) => keySlot(name)))];
    const across = await waiterAcrossFault(names.pop() as string);
    const load = await startLoad(names);
    try {
      for (let round = 0; round < ROUNDS * 2; round += 1) {
        await sleep(700);
        const [from, to] = round % 2 === 0 ? [home, away] : [away, home];
        for (const slot of slots) await migrateSlot(slot, from, to);
        const movedAt = performance.now();
        for (const name of names) expect(await cluster.masterOf(keySlot(name))).toBe(to);
        await recovered(load, names, movedAt);
        console.log(
          `move ${round}: every lock taken again ${Math.round(performance.now() - movedAt)} ms after the move`,
        );
      }
      await sleep(500);
    } finally {
      await load.stop();
    }
    const wokenMs = await across.finish();
    console.log(
      `${expect.getState().currentTestName}: a waiter subscribed before the fault woken ${Math.round(wokenMs)} ms after the release`,
    );
    expect(wokenMs).toBeLessThan(2_000);
    console.log(
      `${expect.getState().currentTestName}: ${load.acquired} sections, ${load.failed} acquires gave up, ${overlaps(load)} overlaps, ${tokensBack(load)} fencing tokens not growing`,
    );
    expect(load.acquired).toBeGreaterThan(50);
    expect(overlaps(load)).toBe(0);
    expect(load.tokens.length).toBeGreaterThan(5);
    expect(tokensBack(load)).toBe(0);
  }, 300_000);
});
