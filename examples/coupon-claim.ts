/**
 * Three processes sharing a limited coupon stock: oversold without a lock, exact with one.
 *
 * The shop puts 20 SUMMER25 coupons in stock (a plain Redis counter) and starts three worker
 * processes. Each one claims coupons in a loop with a read-modify-write: GET the stock, a
 * short pause (the payment check), SET the stock one lower.
 *
 * Round 1 runs the workers without a lock, to show what goes wrong: two workers read the same
 * stock during each other's pause, both sell that coupon, and more coupons go out than there
 * were. Round 2 runs the same workers with each claim inside `withLock('coupons:SUMMER25')`:
 * they take turns, and exactly 20 coupons go out, each once.
 *
 * Round 1 overselling is the expected outcome (if the timing happens to let it through, the
 * example says so). It exits non-zero only if round 2, the one with the lock, goes wrong.
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
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createClient } from 'redis';
import { LockClient } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// Named after what `connect()` resolves: `ReturnType<typeof createClient>` is a client of the
// default options, and node-redis 6 (RESP3 by default) does not take this one for it.
const connect = () => createClient({ url }).connect();
type Redis = Awaited<ReturnType<typeof connect>>;

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

type Mode = 'without-lock' | 'with-latchkey';

/** One claim: the read-modify-write of the stock. Resolves the coupon code, or null when sold out. */
async function claimOne(redis: Redis, keys: CampaignKeys, name: string): Promise<string | null> {
  const stock = Number(await redis.get(keys.stock));
  if (stock <= 0) return null;
  // The gap between reading and writing the stock: without the lock, another worker can read
  // the same number here, and the coupon is sold twice.
  await sleep(randomInt(2, 12));
  await redis.set(keys.stock, String(stock - 1));
  const claimed = `${CAMPAIGN}-${String(stock).padStart(3, '0')}`;
  await redis.rPush(keys.claims, `${name} ${claimed}`);
  return claimed;
}

async function runWorker(name: string, keyPrefix: string, mode: Mode): Promise<void> {
  const keys = campaignKeys(keyPrefix);
  const redis = await connect();
  const locks = new LockClient(redis, { keyPrefix });
  const stockLock = locks.lock(`coupons:${CAMPAIGN}`);
  try {
    console.log('ready');
    await startSignal();
    for (;;) {
      const code =
        mode === 'with-latchkey'
          ? await stockLock.withLock(() => claimOne(redis, keys, name), { waitMs: 10_000 })
          : await claimOne(redis, keys, name);
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

function startWorker(name: string, keyPrefix: string, mode: Mode): RunningWorker {
  // This file again, run as it was run (`npx tsx`, `node --import tsx`, or Node's type stripping).
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
    env: {
      ...process.env,
      REDIS_URL: url,
      COUPON_CLAIM_WORKER: name,
      COUPON_CLAIM_PREFIX: keyPrefix,
      COUPON_CLAIM_MODE: mode,
    },
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

interface RoundResult {
  readonly claims: number;
  readonly duplicates: number;
  readonly stockLeft: number;
  readonly workersOk: boolean;
}

async function runRound(mode: Mode): Promise<RoundResult> {
  // A prefix per round, so the two rounds never see each other's keys.
  const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;
  const keys = campaignKeys(keyPrefix);
  const redis = await connect();
  const workers: RunningWorker[] = [];
  try {
    await redis.set(keys.stock, String(STOCK));
    const spawnedAt = performance.now();
    workers.push(...WORKERS.map((name) => startWorker(name, keyPrefix, mode)));
    await Promise.all(workers.map((worker) => worker.ready));
    console.log(
      `  ${workers.length} worker processes started in ${Math.round(performance.now() - spawnedAt)} ms`,
    );
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
    const counts = new Map<string, number>();
    for (const coupon of coupons) counts.set(coupon, (counts.get(coupon) ?? 0) + 1);
    const soldTwice = [...counts.values()].filter((count) => count > 1).length;

    console.log('  worker    claims  coupons (a * marks a coupon some other worker sold too)');
    WORKERS.forEach((name, index) => {
      const mine = claims
        .filter((claim) => claim.startsWith(`${name} `))
        .map((claim) => {
          const coupon = claim.slice(name.length + 1);
          return `${coupon.slice(-3)}${(counts.get(coupon) ?? 0) > 1 ? '*' : ''}`;
        });
      const exit = codes[index] === 0 ? '' : `  (exit code ${String(codes[index])})`;
      console.log(`  ${name}  ${String(mine.length).padStart(6)}  ${mine.join(' ')}${exit}`);
    });
    console.log(`  total     ${String(claims.length).padStart(6)}  for a stock of ${STOCK}, in ${tookMs} ms`);
    console.log(`  coupons sold more than once: ${soldTwice}; stock left: ${stockLeft}`);
    return {
      claims: claims.length,
      duplicates: coupons.length - counts.size,
      stockLeft,
      workersOk: codes.every((code) => code === 0),
    };
  } finally {
    for (const worker of workers) worker.kill();
    await redis.del([keys.stock, keys.claims]);
    await redis.close();
  }
}

async function runShop(): Promise<void> {
  console.log(`Round 1, WITHOUT a lock: ${WORKERS.length} workers claim ${STOCK} ${CAMPAIGN} coupons`);
  const unlocked = await runRound('without-lock');
  if (!unlocked.workersOk) {
    console.error('A worker failed in round 1');
    process.exitCode = 1;
    return;
  }
  if (unlocked.claims > STOCK || unlocked.duplicates > 0) {
    console.log(
      `  OVERSOLD: ${unlocked.claims} claims for ${STOCK} coupons. This is the failure a lock prevents:`,
    );
    console.log('  two workers read the same stock, and both sold that coupon.');
  } else {
    console.log('  This time the timing let it through without a double sale; run it again to see one.');
  }

  console.log(`\nRound 2, WITH latchkey: the same claims, each inside withLock('coupons:${CAMPAIGN}')`);
  const locked = await runRound('with-latchkey');
  if (locked.claims > STOCK || locked.stockLeft < 0 || locked.duplicates > 0) {
    console.error(`OVERSOLD under the lock: ${locked.claims} claims for a stock of ${STOCK}`);
    process.exitCode = 1;
  } else if (locked.claims !== STOCK || locked.stockLeft !== 0 || !locked.workersOk) {
    console.error('A worker failed before the stock was sold out');
    process.exitCode = 1;
  } else {
    console.log(`  Sold out exactly: ${STOCK} claims, each coupon once.`);
  }
}

const workerName = process.env['COUPON_CLAIM_WORKER'];
if (workerName === undefined) {
  await runShop();
} else {
  const mode = process.env['COUPON_CLAIM_MODE'] === 'without-lock' ? 'without-lock' : 'with-latchkey';
  await runWorker(workerName, process.env['COUPON_CLAIM_PREFIX'] ?? '', mode);
}
