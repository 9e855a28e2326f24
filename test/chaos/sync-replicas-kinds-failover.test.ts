/**
 * A failover right after a semaphore grant and a latch count-down that no replica got, on a
 * master with two replicas and three sentinels, with `syncReplicas: { count: 1 }`.
 *
 * Each round: both replicas are frozen (SIGSTOP) and the master is given more data than the
 * replicas' sockets can buffer, so whatever it writes next stays in its own output buffer; a
 * semaphore acquire and a latch count-down go to it; the master is killed with kill -9, the
 * replicas are thawed, and the sentinels promote one of them, which never got those writes.
 *
 * What must hold: what the caller was told matches what the new master knows. The acquire was
 * refused (ReplicationError), so holding no permit agrees with the new master's full count;
 * without syncReplicas it would resolve, and the new master would hand the same permit out
 * again. The count-down resolved (it cannot be undone) but reported its shortfall on `error`,
 * and the new master lost it, as reported.
 */
import { createClient, type RedisClientType } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, ReplicationError } from '../../src/index.js';
import { startReplicated, type Replicated } from '../support/replication.js';
import { scaled } from './scale.js';

const LOOPBACK = '127.0.0.1';
const ROUNDS = scaled(1, 5);
/** More than the replicas' sockets can buffer (see test/chaos/sentinel-failover.test.ts). */
const FILLER_BYTES = 8 * 1024 * 1024;
const FILLER_KEYS = 4;

async function connect(port: number): Promise<RedisClientType> {
  const client: RedisClientType = createClient({
    socket: { host: LOOPBACK, port, reconnectStrategy: false },
  });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

describe('syncReplicas: a failover after unreplicated semaphore and latch writes', () => {
  let cluster: Replicated;

  beforeAll(async () => {
    cluster = await startReplicated();
  }, 60_000);

  afterAll(async () => {
    for (const node of cluster?.nodes ?? []) node.resume();
    await cluster?.stop();
  });

  it(
    'the refused acquire holds nothing and the new master has every permit; the reported count-down is lost',
    async () => {
      for (let round = 0; round < ROUNDS; round += 1) {
        const redis = await connect(await cluster.masterPort());
        const locks = new LockClient(redis, {
          keyPrefix: `failover:${round}:`,
          syncReplicas: { count: 1, timeoutMs: 100 },
        });
        const errors: Error[] = [];
        locks.on('error', (error) => errors.push(error));
        // Sets the starting values while the replicas are up, waiting as long as a busy machine
        // needs for their acknowledgement: so they are on every replica. The 100 ms of `locks`
        // are for the writes the paused replicas cannot acknowledge.
        const setup = new LockClient(redis, {
          keyPrefix: `failover:${round}:`,
          syncReplicas: { count: 1, timeoutMs: 5_000 },
        });
        try {
          const semaphore = locks.semaphore('permits');
          const latch = locks.countDownLatch('latch');
          expect(await setup.semaphore('permits').trySetPermits(3)).toBe(true);
          expect(await setup.countDownLatch('latch').trySetCount(3)).toBe(true);
          await setup.close();

          const replicas = await cluster.replicas();
          for (const replica of replicas) replica.pause();
          const filler = 'x'.repeat(FILLER_BYTES);
          for (let i = 0; i < FILLER_KEYS; i += 1) await redis.set(`filler:${i}`, filler);

          const refused = await semaphore.acquire({ waitMs: 300 }).catch((caught: unknown) => caught);
          expect(refused).toBeInstanceOf(ReplicationError);
          expect(refused).toMatchObject({ acknowledged: 0, required: 1 });
          // Given back on the master before the call rejected.
          expect(await redis.get(semaphore.key)).toBe('3');
          expect(await latch.countDown()).toBe(2);
          expect(errors).toHaveLength(1);
          expect(errors[0]).toBeInstanceOf(ReplicationError);
          expect(errors[0]?.message).toMatch(/Latch "latch" was counted down/);

          await cluster.failover({
            revive: false,
            afterKill: () => {
              for (const replica of replicas) replica.resume();
            },
          });
          const promoted = await connect(await cluster.masterPort());
          try {
            // Nobody holds a permit, and the new master has all three free.
            expect(await promoted.get(semaphore.key)).toBe('3');
            // The count-down whose shortfall was reported did not survive.
            expect(await promoted.get(latch.key)).toBe('3');
            await promoted.del(Array.from({ length: FILLER_KEYS }, (_, i) => `filler:${i}`));
          } finally {
            promoted.destroy();
          }
        } finally {
          await setup.close();
          await locks.close();
          // Closed already when its master was killed (no reconnect): destroy() then throws.
          if (redis.isOpen) redis.destroy();
          await cluster.revive();
        }
      }
    },
    60_000 * ROUNDS,
  );
});
