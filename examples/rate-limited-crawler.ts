/**
 * A crawler that keeps to a host's limit of concurrent fetches, even when a worker crashes.
 *
 * The host shop.example.com allows 3 concurrent fetches. Crawler workers share that limit
 * through a permit semaphore of 3 permits: each fetch runs holding one permit. Before the crawl
 * starts, one worker process takes a permit and is killed (SIGKILL) mid-fetch, as an OOM kill
 * or a crashed node would: it never releases. Its permit's lease is no longer renewed, so the
 * permit comes back within one lease (1.5 s here) and the crawl goes back to 3 fetches at once.
 * A plain counting semaphore would have lost that permit for good.
 *
 * The example prints each fetch as it starts with the number in flight, and checks that no more
 * than 3 ever ran at once, that the crashed worker's permit came back within its lease, and that
 * all 3 permits are free at the end. Then it deletes the semaphore's counter, which has no expiry.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/rate-limited-crawler.ts
 * or with a throwaway redis-server:
 *   npm run example -- rate-limited-crawler
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
const HOST = 'shop.example.com';
const PERMITS = 3;
const WORKERS = 5;
const PAGES = 24;
/** The lease of the worker that crashes: its permit comes back this long after its last renewal. */
const CRASHED_LEASE_MS = 1_500;

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

// ---- the worker that crashes: run by the example itself as a child process ----------------

if (process.argv.includes('--crashing-worker')) {
  const redis = await createClient({ url }).connect();
  const locks = new LockClient(redis, {
    keyPrefix: process.env['KEY_PREFIX'] ?? '',
    watchdogTimeoutMs: CRASHED_LEASE_MS,
  });
  await locks.permitSemaphore(`crawl:${HOST}`, { permits: PERMITS }).acquire();
  // Holding a permit, "fetching" forever: the parent kills this process now.
  console.log('holding');
  await new Promise(() => undefined);
}

// ---- the crawl ----------------------------------------------------------------------------

// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;
const redis = await createClient({ url }).connect();
const connections = await Promise.all(Array.from({ length: WORKERS }, () => redis.duplicate().connect()));
// One connection and one LockClient per worker, as if each ran in a process of its own.
const clients = connections.map((connection) => new LockClient(connection, { keyPrefix }));

/** Stands in for an HTTP GET that honours an AbortSignal. */
async function fetchPage(path: string, signal: AbortSignal): Promise<number> {
  await sleep(120 + Math.floor(Math.random() * 80), undefined, { signal });
  return 2_000 + path.length * 37;
}

async function crashAWorker(): Promise<number> {
  const child = spawn(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), '--crashing-worker'],
    { env: { ...process.env, KEY_PREFIX: keyPrefix, REDIS_URL: url }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) if (line === 'holding') break;
  child.kill('SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
  return performance.now();
}

const queue = Array.from({ length: PAGES }, (_, index) => `/products?page=${index + 1}`);
let inFlight = 0;
let most = 0;
let backToFullAt: number | undefined;
let startedAt = performance.now();

async function crawl(worker: number, locks: LockClient): Promise<void> {
  const fetches = locks.permitSemaphore(`crawl:${HOST}`, { permits: PERMITS });
  for (let path = queue.shift(); path !== undefined; path = queue.shift()) {
    const page = path;
    const bytes = await fetches.withLock(async (lease) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      if (inFlight === PERMITS) backToFullAt ??= performance.now();
      const at = ((performance.now() - startedAt) / 1_000).toFixed(2);
      console.log(
        `  ${at.padStart(5)} s  crawler-${worker}  GET ${HOST}${page.padEnd(18)} in flight: ${inFlight}`,
      );
      try {
        return await fetchPage(page, lease.signal);
      } finally {
        inFlight -= 1;
      }
    });
    ensure(bytes > 0, `an empty page at ${page}`);
    // Parsing the page and queueing its links needs no permit: the host is not involved.
    await sleep(40 + Math.floor(Math.random() * 40));
  }
}

try {
  console.log(`${HOST} allows ${PERMITS} concurrent fetches; ${WORKERS} crawler workers share them.`);
  const killedAt = await crashAWorker();
  const semaphore = clients[0]?.permitSemaphore(`crawl:${HOST}`, { permits: PERMITS });
  ensure(semaphore !== undefined, 'no crawler');
  console.log(
    `A worker took a permit and was killed (SIGKILL) mid-fetch: ${await semaphore.availablePermits()} of ${PERMITS} permits free.`,
  );
  startedAt = performance.now();
  await Promise.all(clients.map((locks, index) => crawl(index + 1, locks)));

  ensure(most <= PERMITS, `${most} fetches ran at once, over the host's limit of ${PERMITS}`);
  ensure(backToFullAt !== undefined, `the crawl never ran ${PERMITS} fetches at once again`);
  const returnedMs = backToFullAt - killedAt;
  console.log(
    `Most fetches at once: ${most}. The crashed worker's permit came back ${Math.round(returnedMs)} ms after the kill (lease ${CRASHED_LEASE_MS} ms).`,
  );
  ensure(
    returnedMs < CRASHED_LEASE_MS + 1_000,
    `the crashed worker's permit took ${Math.round(returnedMs)} ms`,
  );
  const free = await semaphore.availablePermits();
  ensure(free === PERMITS, `${free} of ${PERMITS} permits free after the crawl`);
  console.log(`Crawled ${PAGES} pages within the limit; all ${PERMITS} permits are free again.`);
} finally {
  // Closing first: a close gives back permits still held, which writes the counter again.
  await Promise.all(clients.map((locks) => locks.close()));
  // The counter of free permits never expires (it is the semaphore's state, shared with
  // Redisson clients), so the example deletes it, and the sorted set of permit leases with it.
  const counter = `${keyPrefix}crawl:${HOST}`;
  await redis.del([counter, `{${counter}}:timeout`]);
  await Promise.all([redis.close(), ...connections.map((connection) => connection.close())]);
}
