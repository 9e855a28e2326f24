// Redlock on 3 masters: latchkey's RedlockClient beside redlock 4 and redis-semaphore's
// RedlockMutex, each at its defaults, on three redis-servers of the benchmark's own.
// Scenarios: the uncontended cycle (acquire + release of one free lock, one caller) and a
// contended run (2 clients x 2 callers on one lock, short critical sections), with the
// mutual-exclusion check of the main benchmark. Run with `npm run bench:redlock`; results in
// bench/results/redlock.json and redlock.md.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { RedlockMutex, TimeoutError } from 'redis-semaphore';
import { latchkey as built } from './latchkey-package.js';
import { startBenchRedis, type BenchRedis } from './redis.js';
import { latency, overlaps, round, type Interval, type Latency } from './stats.js';

const { RedlockClient } = built;

const MASTERS = 3;
const WARMUP = 50;
const UNCONTENDED_CYCLES = Number(process.env['BENCH_REDLOCK_CYCLES'] ?? 1_000);
const CONTENDED_CYCLES = Number(process.env['BENCH_REDLOCK_CONTENDED'] ?? 200);
/** redlock 4 has no renewal: a lease that outlasts every hold here. */
const REDLOCK_TTL_MS = 10_000;

interface Held {
  release(): Promise<unknown>;
}

interface Contender {
  acquire(key: string): Promise<Held>;
  /** Times the library gave up at its defaults and was asked again. */
  giveUps: number;
  close(): Promise<void>;
}

type Factory = (urls: readonly string[]) => Promise<Contender>;

async function ioredisClients(urls: readonly string[]): Promise<Redis[]> {
  return Promise.all(
    urls.map(async (url) => {
      const redis = new Redis(url, { lazyConnect: true });
      redis.on('error', () => undefined);
      await redis.connect();
      return redis;
    }),
  );
}

const latchkey: Factory = async (urls) => {
  const clients = await Promise.all(
    urls.map(async (url) => {
      const client = createClient({ url });
      client.on('error', () => undefined);
      return client.connect();
    }),
  );
  const locks = new RedlockClient(clients);
  return {
    giveUps: 0,
    acquire: (key) => locks.lock(key).acquire(),
    async close() {
      await locks.close();
      for (const client of clients) client.destroy();
    },
  };
};

interface NodeRedlock {
  lock(resource: string, ttlMs: number): Promise<{ unlock(): Promise<void> }>;
  on(event: 'clientError', listener: (error: unknown) => void): void;
}
interface NodeRedlockConstructor {
  new (clients: Redis[]): NodeRedlock;
  LockError: new (...args: never[]) => Error;
}
// redlock 4 ships CommonJS without type declarations.
const Redlock = createRequire(import.meta.url)('redlock') as NodeRedlockConstructor;

const nodeRedlock: Factory = async (urls) => {
  const clients = await ioredisClients(urls);
  const redlock = new Redlock(clients);
  redlock.on('clientError', () => undefined);
  const contender: Contender = {
    giveUps: 0,
    async acquire(key) {
      for (;;) {
        try {
          const lock = await redlock.lock(key, REDLOCK_TTL_MS);
          return { release: () => lock.unlock() };
        } catch (error) {
          if (!(error instanceof Redlock.LockError)) throw error;
          contender.giveUps += 1;
        }
      }
    },
    close() {
      for (const client of clients) client.disconnect();
      return Promise.resolve();
    },
  };
  return contender;
};

const redisSemaphore: Factory = async (urls) => {
  const clients = await ioredisClients(urls);
  const contender: Contender = {
    giveUps: 0,
    async acquire(key) {
      const mutex = new RedlockMutex(clients, key);
      for (;;) {
        try {
          await mutex.acquire();
          return { release: () => mutex.release() };
        } catch (error) {
          if (!(error instanceof TimeoutError)) throw error;
          contender.giveUps += 1;
        }
      }
    },
    close() {
      for (const client of clients) client.disconnect();
      return Promise.resolve();
    },
  };
  return contender;
};

const CONTENDERS: Readonly<Record<string, Factory>> = {
  'latchkey-redlock': latchkey,
  redlock: nodeRedlock,
  'rs-redlock-mutex': redisSemaphore,
};

interface Result {
  readonly contender: string;
  readonly uncontended: Latency;
  readonly contended: {
    readonly cycles: number;
    readonly throughputPerS: number;
    readonly overlaps: number;
    readonly giveUps: number;
  };
}

async function uncontended(factory: Factory, urls: readonly string[], name: string): Promise<Latency> {
  const contender = await factory(urls);
  try {
    for (let i = 0; i < WARMUP; i += 1) await (await contender.acquire(`${name}:warm`)).release();
    const durations: number[] = [];
    for (let i = 0; i < UNCONTENDED_CYCLES; i += 1) {
      const start = process.hrtime.bigint();
      await (await contender.acquire(`${name}:free`)).release();
      durations.push(Number(process.hrtime.bigint() - start));
    }
    return latency(durations);
  } finally {
    await contender.close();
  }
}

async function contended(
  factory: Factory,
  urls: readonly string[],
  name: string,
): Promise<Result['contended']> {
  const clients = [await factory(urls), await factory(urls)];
  const intervals: Interval[] = [];
  let remaining = CONTENDED_CYCLES;
  const caller = async (contender: Contender): Promise<void> => {
    while (remaining > 0) {
      remaining -= 1;
      const held = await contender.acquire(`${name}:hot`);
      const start = Number(process.hrtime.bigint());
      await new Promise((resolve) => setTimeout(resolve, 1));
      intervals.push([start, Number(process.hrtime.bigint())]);
      await held.release();
    }
  };
  const startedAt = performance.now();
  try {
    await Promise.all(clients.flatMap((contender) => [caller(contender), caller(contender)]));
  } finally {
    await Promise.all(clients.map((contender) => contender.close()));
  }
  const seconds = (performance.now() - startedAt) / 1_000;
  return {
    cycles: intervals.length,
    throughputPerS: round(intervals.length / seconds, 1),
    overlaps: overlaps(intervals),
    giveUps: clients.reduce((sum, contender) => sum + contender.giveUps, 0),
  };
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const servers: BenchRedis[] = [];
  for (let i = 0; i < MASTERS; i += 1) servers.push(await startBenchRedis());
  const urls = servers.map((server) => server.url);
  const results: Result[] = [];
  try {
    for (const [name, factory] of Object.entries(CONTENDERS)) {
      if (only.length > 0 && !only.includes(name)) continue;
      const result: Result = {
        contender: name,
        uncontended: await uncontended(factory, urls, name),
        contended: await contended(factory, urls, name),
      };
      results.push(result);
      console.log(JSON.stringify(result));
    }
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
  const lines = [
    `# Redlock on ${MASTERS} masters`,
    '',
    `Uncontended: ${UNCONTENDED_CYCLES} acquire + release cycles of one free lock, one caller, after ${WARMUP} warm-up cycles. Contended: ${CONTENDED_CYCLES} cycles by 2 clients x 2 callers on one lock, 1 ms critical sections. Every library at its defaults.`,
    '',
    '| contender | uncontended p50 ms | p99 ms | contended cycles/s | overlaps | give-ups |',
    '|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.contender} | ${round(r.uncontended.p50Ms)} | ${round(r.uncontended.p99Ms)} | ${r.contended.throughputPerS} | ${r.contended.overlaps} | ${r.contended.giveUps} |`,
    ),
    '',
  ];
  if (only.length === 0) {
    writeFileSync(
      new URL('./results/redlock.json', import.meta.url),
      `${JSON.stringify(results, null, 2)}\n`,
    );
    writeFileSync(new URL('./results/redlock.md', import.meta.url), lines.join('\n'));
  }
  console.log(lines.join('\n'));
}

await main();
