/**
 * A hand-over must count a waiter as listening only if the master itself delivers the grant.
 * Redis passes every PUBLISH on to its replicas, whose subscribers hear it too, though the
 * master's own count of receivers leaves them out. A waiter whose subscriber connection sits on
 * a replica (its client reached the replica by a stale address, or a Sentinel client put it
 * there) while its commands reach the master is not live for the master: a grant to it must not
 * go out, or the waiter would take a lock the master handed to the next waiter, or freed.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, type Lease } from '../../src/index.js';
import {
  cannot,
  connectClient,
  connectNodeRedis,
  destroyClient,
  type LockConnection,
  type NodeRedis,
} from '../support/clients.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

const LOOPBACK = '127.0.0.1';

/** Subscriber connections on a server, from its CLIENT LIST. */
async function subscribers(admin: NodeRedis): Promise<number> {
  const list = await admin.sendCommand<string>(['CLIENT', 'LIST', 'TYPE', 'pubsub']);
  return list.split('\n').filter((line) => line.trim() !== '').length;
}

/** GLIDE's subscriber cannot be put on a replica: see cannot() in clients.ts. */
const noReplica = cannot('subscriber-on-replica') !== undefined;

describe.skipIf(noReplica)('a waiter whose subscriber connection sits on a replica', () => {
  let master: RedisInstance;
  let replica: RedisInstance;
  let admin: NodeRedis;
  let replicaAdmin: NodeRedis;
  const opened: { locks: LockClient; redis: LockConnection }[] = [];
  const proxies: FaultProxy[] = [];

  beforeAll(async () => {
    master = await startRedis();
    replica = await startRedis({ args: ['--replicaof', LOOPBACK, String(master.port)] });
    admin = await connectNodeRedis({ url: master.url });
    replicaAdmin = await connectNodeRedis({ url: replica.url });
    await waitUntil(
      'the replica is linked',
      async () => (await replicaAdmin.info('replication')).includes('master_link_status:up'),
      10_000,
    );
  }, 30_000);

  afterEach(async () => {
    for (const { locks, redis } of opened.splice(0)) {
      await locks.close();
      destroyClient(redis);
    }
    await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  });

  afterAll(async () => {
    destroyClient(admin);
    destroyClient(replicaAdmin);
    await Promise.all([master?.stop(), replica?.stop()]);
  });

  async function lockClient(url: string, keyPrefix: string): Promise<LockClient> {
    const redis = await connectClient({ url });
    const locks = new LockClient(redis, { keyPrefix });
    locks.on('error', () => undefined);
    opened.push({ locks, redis });
    return locks;
  }

  /**
   * A LockClient whose command connection reaches the master and whose subscriber connection,
   * opened later by the same address, reaches the replica.
   */
  async function splitClient(keyPrefix: string): Promise<LockClient> {
    const proxy = await startFaultProxy({ targetHost: LOOPBACK, targetPort: master.port });
    proxies.push(proxy);
    const locks = await lockClient(proxy.url, keyPrefix);
    proxy.retarget(LOOPBACK, replica.port);
    return locks;
  }

  const queued = async (key: string): Promise<number> => Number(await admin.lLen(`latchkey_queue:{${key}}`));

  it('is not handed the lock: it takes it by asking the master once the lock is free', async () => {
    const prefix = uniquePrefix('handover-replica');
    const holder = await lockClient(master.url, prefix);
    const split = await splitClient(prefix);
    const lease = await holder.lock('ledger').acquire();
    const subscribedBefore = await subscribers(replicaAdmin);
    const waiting = split.lock('ledger').acquire({ waitMs: 10_000 });
    await waitUntil(
      'the waiter is queued on the master',
      async () => (await queued(lease.key)) === 1,
      10_000,
    );
    // Its subscriber is on the replica, and nobody listens on the master.
    expect(await subscribers(replicaAdmin)).toBeGreaterThan(subscribedBefore);
    expect(await subscribers(admin)).toBe(0);

    await lease.release();
    const taken = await within(waiting, 5_000, 'the waiter takes the lock');
    // The master holds it for the waiter: one owner field, at count 1.
    expect(await admin.hVals(lease.key)).toEqual(['1']);
    await taken.release();
    expect(await admin.exists(lease.key)).toBe(0);
    expect(await queued(lease.key)).toBe(0);
  });

  it('on a server that refuses PUBSUB to the client, a release hands nothing over and the waiter takes the lock by asking', async () => {
    // An ACL user granted everything but PUBSUB: the hand-over cannot count the listeners of a
    // grant channel, so it skips the waiter rather than failing the release.
    await admin.sendCommand([
      'ACL',
      'SETUSER',
      'no-pubsub',
      'on',
      '>no-pubsub',
      '~*',
      '&*',
      '+@all',
      '-pubsub',
    ]);
    const url = `redis://no-pubsub:no-pubsub@${LOOPBACK}:${master.port}`;
    const prefix = uniquePrefix('handover-replica');
    const holder = await lockClient(url, prefix);
    const waiter = await lockClient(url, prefix);
    const lease = await holder.lock('ledger').acquire();
    const waiting = waiter.lock('ledger').acquire({ waitMs: 10_000 });
    await waitUntil('the waiter is queued', async () => (await queued(lease.key)) === 1, 10_000);
    const refusedBefore = (await admin.sendCommand<unknown[]>(['ACL', 'LOG'])).length;

    await lease.release();
    const taken = await within(waiting, 5_000, 'the waiter takes the lock');
    expect(await admin.hVals(lease.key)).toEqual(['1']);
    // The release's count of listeners was refused, and logged as such.
    expect((await admin.sendCommand<unknown[]>(['ACL', 'LOG'])).length).toBeGreaterThan(refusedBefore);
    await taken.release();
    expect(await admin.exists(lease.key)).toBe(0);
  });

  it('never holds the lock together with the waiter the master handed it to', async () => {
    const prefix = uniquePrefix('handover-replica');
    const holder = await lockClient(master.url, prefix);
    const split = await splitClient(prefix);
    const direct = await lockClient(master.url, prefix);
    const lease = await holder.lock('ledger').acquire();
    // The split waiter queues first, the direct one behind it.
    const first = settle(split.lock('ledger').acquire({ waitMs: 10_000 }));
    await waitUntil('the first waiter is queued', async () => (await queued(lease.key)) === 1, 10_000);
    const second = settle(direct.lock('ledger').acquire({ waitMs: 10_000 }));
    await waitUntil('the second waiter is queued', async () => (await queued(lease.key)) === 2, 10_000);

    await lease.release();
    // The master skips the first waiter, which does not listen there, and hands the lock to the
    // second; the first must not take it meanwhile.
    const granted = await within(second, 5_000, 'the master hands the lock to the direct waiter');
    expect(granted.error).toBeUndefined();
    await sleep(300);
    const early = await Promise.race([first, sleep(0).then(() => 'waiting' as const)]);
    expect(early).toBe('waiting');
    expect(await admin.hVals(lease.key)).toEqual(['1']);

    await (granted.value as Lease).release();
    const later = await within(first, 5_000, 'the split waiter takes the lock once it is free');
    expect(later.error).toBeUndefined();
    expect(await admin.hVals(lease.key)).toEqual(['1']);
    await (later.value as Lease).release();
    expect(await admin.exists(lease.key)).toBe(0);
  });
});
