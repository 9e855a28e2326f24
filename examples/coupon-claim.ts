/**
 * Three processes sharing a limited coupon stock without overselling it.
 *
 * The shop puts 20 SUMMER25 coupons in stock (a plain Redis counter) and starts three worker
 * processes. Each one claims coupons in a loop with a read-modify-write: GET the stock, a
 * short pause (the payment check), SET the stock one lower. Without a lock, two workers could
 * read the same stock and sell the same coupon twice; under `withLock('coupons:SUMMER25')`
 * they take turns. When the stock is gone, the shop prints who claimed what and checks that
 * exactly 20 coupons went out, each once, and that it exits non-zero otherwise.
 *
 * This file is both the shop and, with COUPON_CLAIM_WORKER set, one worker.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/coupon-claim.ts
 * or with a throwaway redis-server:
 *   npm run example -- coupon-claim
 */
import { spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createClient } from 'redis';
import { LockClient } from '../src/index.js';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';

const CAMPAIGN = 'SUMMER25';
const STOCK = 20;
const WORKERS = ['worker-1', 'worker-2', 'worker-3'];
const WORKER_TIMEOUT_MS = 15_000;

interface CampaignKeys {
  readonly stock: string;
  readonly claims: string;
}

function campaignKeys(keyPrefix: string): CampaignKeys {
  return { stock: `${keyPrefix}coupons:${CAMPAIGN}:stock`, claims: `${keyPrefix}coupons:${CAMPAIGN}:claims` };
}

// ---- worker process ------------------------------------------------------------------------

/** Resolves when the shop writes `go`, so that all workers start claiming together. */
async function startSignal(): Promise<void> {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim() === 'go') break;
  }
  lines.close();
}

async function runWorker(name: string, keyPrefix: string): Promise<void> {
  const keys = campaignKeys(keyPrefix);
  const redis = await createClient({ url }).connect();
  const locks = new LockClient(redis, { keyPrefix });
  const stockLock = locks.lock(`coupons:${CAMPAIGN}`);
  try {
    console.log('ready');
    await startSignal();
    for (;;) {
      const code = await stockLock.withLock(
        async () => {
          const stock = Number(await redis.get(keys.stock));
          if (stock <= 0) return null;
          // The gap between reading and writing the stock: without the lock, another worker
          // could read the same number here and the coupon would be sold twice.
          await sleep(randomInt(2, 12));
          await redis.set(keys.stock, String(stock - 1));
          const claimed = `${CAMPAIGN}-${String(stock).padStart(3, '0')}`;
          await redis.rPush(keys.claims, `${name} ${claimed}`);
          return claimed;
        },
        { waitMs: 10_000 },
      );
      if (code === null) break;
      // Emailing the code needs no lock; the other workers take their turns meanwhile.
      await sleep(randomInt(5, 25));
    }
  } finally {
    await locks.close();
    await redis.close();
  }
}

// ---- shop (parent process) -----------------------------------------------------------------

interface RunningWorker {
  readonly name: string;
  readonly ready: Promise<void>;
  readonly exited: Promise<number | null>;
  start(): void;
  kill(): void;
}

function startWorker(name: string, keyPrefix: string): RunningWorker {
  const self = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ['--import', 'tsx', self], {
    // The project root, where `--import tsx` resolves.
    cwd: dirname(dirname(self)),
    env: { ...process.env, REDIS_URL: url, COUPON_CLAIM_WORKER: name, COUPON_CLAIM_PREFIX: keyPrefix },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('close', (code) => resolve(code));
  });
  const ready = new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'ready') resolve();
      else console.log(`  [${name}] ${line}`);
    });
    void exited.then((code) =>
      reject(new Error(`${name} exited with code ${String(code)} before it was ready`)),
    );
  });
  // A worker that died makes writes to its stdin fail; its exit code reports that.
  child.stdin.on('error', () => {});
  return {
    name,
    ready,
    exited,
    start: () => child.stdin.end('go\n'),
    kill: () => child.kill('SIGKILL'),
  };
}

async function runShop(): Promise<void> {
  const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;
  const keys = campaignKeys(keyPrefix);
  const redis = await createClient({ url }).connect();
  const workers: RunningWorker[] = [];
  try {
    await redis.set(keys.stock, String(STOCK));
    console.log(`${STOCK} ${CAMPAIGN} coupons in stock; ${WORKERS.length} worker processes claim them`);

    workers.push(...WORKERS.map((name) => startWorker(name, keyPrefix)));
    await Promise.all(workers.map((worker) => worker.ready));
    const startedAt = performance.now();
    for (const worker of workers) worker.start();

    const timeout = setTimeout(() => {
      console.error(`  workers still running after ${WORKER_TIMEOUT_MS} ms; stopping them`);
      for (const worker of workers) worker.kill();
    }, WORKER_TIMEOUT_MS);
    const codes = await Promise.all(workers.map((worker) => worker.exited));
    clearTimeout(timeout);
    const tookMs = Math.round(performance.now() - startedAt);

    const claims = await redis.lRange(keys.claims, 0, -1);
    const stockLeft = Number(await redis.get(keys.stock));
    const coupons = claims.map((claim) => claim.split(' ')[1] ?? '');
    const duplicates = coupons.length - new Set(coupons).size;

    console.log('  worker    claims  coupons');
    WORKERS.forEach((name, index) => {
      const mine = claims.filter((claim) => claim.startsWith(`${name} `)).map((claim) => claim.slice(-3));
      const exit = codes[index] === 0 ? '' : `  (exit code ${String(codes[index])})`;
      console.log(`  ${name}  ${String(mine.length).padStart(6)}  ${mine.join(' ')}${exit}`);
    });
    console.log(`  total     ${String(claims.length).padStart(6)}  of ${STOCK}, in ${tookMs} ms`);
    console.log(`  stock left ${stockLeft}, coupons claimed twice: ${duplicates}`);

    if (claims.length > STOCK || stockLeft < 0 || duplicates > 0) {
      console.error(`OVERSOLD: ${claims.length} claims for a stock of ${STOCK}`);
      process.exitCode = 1;
    } else if (claims.length !== STOCK || stockLeft !== 0 || codes.some((code) => code !== 0)) {
      console.error('A worker failed before the stock was sold out');
      process.exitCode = 1;
    } else {
      console.log(`Sold out exactly: ${STOCK} claims, each coupon once.`);
    }
  } finally {
    for (const worker of workers) worker.kill();
    await redis.del([keys.stock, keys.claims]);
    await redis.close();
  }
}

const workerName = process.env['COUPON_CLAIM_WORKER'];
if (workerName === undefined) {
  await runShop();
} else {
  await runWorker(workerName, process.env['COUPON_CLAIM_PREFIX'] ?? '');
}
