/**
 * A count-down latch: a service instance takes traffic only once every cache-warming worker
 * has finished.
 *
 * A deploy starts four warming workers, one per shard of the product catalogue, and the
 * storefront instance that will serve from the cache. The storefront sets the latch to the
 * number of shards (a second instance starting at the same time finds it already set and
 * leaves it alone), then awaits it. Each worker counts the latch down when its shard is warm;
 * the last count-down publishes one message that wakes the storefront, which prints how long
 * after the last shard it opened for traffic. The latch is given a lifetime, so a deploy that
 * dies half-way leaves no latch behind.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/warmup-latch.ts
 * or with a throwaway redis-server:
 *   npm run example -- warmup-latch
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// Named after what `connect()` resolves: `ReturnType<typeof createClient>` is a client of the
// default options, and node-redis 6 (RESP3 by default) does not take this one for it.
const connect = () => createClient({ url }).connect();
type Redis = Awaited<ReturnType<typeof connect>>;
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;

const SHARDS = ['books', 'garden', 'kitchen', 'toys'] as const;
const LATCH_NAME = 'deploy:2026-11-25:catalogue-warm';
/** A deploy that dies half-way leaves no latch behind for longer than this. */
const LATCH_TTL_MS = 10 * 60_000;
/** Far above a message's delivery, far below a waiter that polled every second or so. */
const MAX_WAKE_MS = 500;

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function at(startedAt: number): string {
  return `${String(Math.round(performance.now() - startedAt)).padStart(5)} ms`;
}

const redis = await connect();
// One connection and one LockClient per process of the deploy, as if each ran on its own.
const connections: Redis[] = [];
async function processClient(): Promise<LockClient> {
  const connection = await redis.duplicate().connect();
  connections.push(connection);
  return new LockClient(connection, { keyPrefix });
}

const storefront = await processClient();
const secondInstance = await processClient();
const workers = await Promise.all(SHARDS.map(() => processClient()));
const startedAt = performance.now();

try {
  const gate = storefront.countDownLatch(LATCH_NAME);
  ensure(await gate.trySetCount(SHARDS.length, { ttlMs: LATCH_TTL_MS }), 'the latch was free');
  console.log(`${at(startedAt)}  storefront: waiting for ${SHARDS.length} shards to warm`);
  const again = await secondInstance.countDownLatch(LATCH_NAME).trySetCount(SHARDS.length);
  console.log(`${at(startedAt)}  second storefront instance: trySetCount -> ${again} (already counting)`);
  ensure(!again, 'a second trySetCount leaves the count alone');

  let lastShardAt = 0;
  const serving = gate.await({ waitMs: 30_000 }).then((warm) => {
    const openedAt = performance.now();
    console.log(`${at(startedAt)}  storefront: cache warm, taking traffic`);
    return { warm, openedAt };
  });

  await Promise.all(
    SHARDS.map(async (shard, index) => {
      const latch = workers[index]?.countDownLatch(LATCH_NAME);
      ensure(latch !== undefined, 'a worker per shard');
      // Loading a shard into the cache: a few hundred milliseconds each, finishing in any order.
      await sleep(200 + Math.floor(Math.random() * 600));
      const countingAt = performance.now();
      const left = await latch.countDown();
      if (left === 0) lastShardAt = countingAt;
      console.log(`${at(startedAt)}  warmer ${shard.padEnd(8)} done, ${left} shard(s) to go`);
    }),
  );

  const { warm, openedAt } = await serving;
  ensure(warm, 'the latch opened before the wait ran out');
  const wakeMs = openedAt - lastShardAt;
  console.log(
    `The storefront opened ${wakeMs.toFixed(1)} ms after the last shard was warm: woken by the latch's ` +
      `message, not by polling. Count now: ${await gate.count()}.`,
  );
  ensure(wakeMs < MAX_WAKE_MS, `woken within ${MAX_WAKE_MS} ms of the last count-down`);
} finally {
  await Promise.all([storefront, secondInstance, ...workers].map((locks) => locks.close()));
  await Promise.all(connections.map((connection) => connection.quit()));
  await redis.quit();
}
