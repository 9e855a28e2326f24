/**
 * A read-write lock around a cached report: many readers at once, one writer alone.
 *
 * Six request handlers (each with a connection and a LockClient of its own, as separate
 * processes would have) serve the cached daily sales report over and over, under the read lock,
 * so they read side by side. A refresher rebuilds the report three times, section by section,
 * under the write lock. The example counts:
 *   - how many handlers read at the same moment (more than one: readers share the lock);
 *   - torn reads, a report with sections of two different builds (zero: no reader ever sees a
 *     rebuild half done);
 *   - how long each rebuild waited for the write lock while handlers kept reading without a
 *     gap (bounded: a waiting writer holds new readers back, so the stream cannot starve it).
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/report-cache.ts
 * or with a throwaway redis-server:
 *   npm run example -- report-cache
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;

const HANDLERS = 6;
const REBUILDS = 3;
const SECTIONS = ['summary', 'by-region', 'by-product', 'refunds'] as const;
const LOCK_NAME = 'report:daily-sales';
const REPORT_KEY = `${keyPrefix}cache:report:daily-sales`;
/** A handler takes a while to render the report it read; the next request follows at once. */
const RENDER_MS = 40;
/** Far above what a rebuild should wait: each reader inside when it asks leaves within RENDER_MS. */
const MAX_REBUILD_WAIT_MS = 2_000;

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

const redis = await createClient({ url }).connect();
const connections = [redis];
const handlerClients = await Promise.all(
  Array.from({ length: HANDLERS }, async () => {
    const connection = await redis.duplicate().connect();
    connections.push(connection);
    return new LockClient(connection, { keyPrefix });
  }),
);
const refresher = new LockClient(redis, { keyPrefix });

/** Writes a build of the report section by section, as a real rebuild would. */
async function build(version: number): Promise<void> {
  for (const section of SECTIONS) {
    await redis.hSet(REPORT_KEY, section, `build ${version}: ${section} figures`);
    await sleep(15);
  }
}

let reading = 0;
let mostAtOnce = 0;
let reads = 0;
let torn = 0;
let stop = false;

async function handle(locks: LockClient): Promise<void> {
  const report = locks.readWriteLock(LOCK_NAME).readLock();
  while (!stop) {
    await report.withLock(async () => {
      reading += 1;
      mostAtOnce = Math.max(mostAtOnce, reading);
      try {
        const sections = await redis.hGetAll(REPORT_KEY);
        const builds = new Set(Object.values(sections).map((text) => text.split(':')[0]));
        if (builds.size > 1) torn += 1;
        reads += 1;
        await sleep(RENDER_MS);
      } finally {
        reading -= 1;
      }
    });
  }
}

try {
  await build(0);
  const handlers = handlerClients.map((locks) => handle(locks));
  await sleep(300);

  const report = refresher.readWriteLock(LOCK_NAME).writeLock();
  const waits: number[] = [];
  for (let version = 1; version <= REBUILDS; version += 1) {
    const askedAt = performance.now();
    await report.withLock(async () => {
      waits.push(performance.now() - askedAt);
      ensure(reading === 0, 'no handler reads while the report is rebuilt');
      await build(version);
    });
    console.log(
      `rebuild ${version}: waited ${waits.at(-1)?.toFixed(0)} ms for the write lock, then rebuilt ${SECTIONS.length} sections`,
    );
    await sleep(250);
  }
  stop = true;
  await Promise.all(handlers);

  console.log(`handlers served the report ${reads} times; at most ${mostAtOnce} read at the same moment`);
  console.log(`torn reads (sections of two builds): ${torn}`);
  ensure(mostAtOnce > 1, 'readers share the lock');
  ensure(torn === 0, 'no reader sees a rebuild half done');
  ensure(
    waits.every((waited) => waited < MAX_REBUILD_WAIT_MS),
    `every rebuild got the write lock within ${MAX_REBUILD_WAIT_MS} ms though handlers kept reading`,
  );
  console.log('Every rebuild got in promptly, and no reader saw one half done.');
} finally {
  stop = true;
  await Promise.all([refresher, ...handlerClients].map((locks) => locks.close()));
  await redis.del(REPORT_KEY);
  await Promise.all(connections.map((connection) => connection.quit()));
}
