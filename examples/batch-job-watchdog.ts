/**
 * A long batch job that keeps its lock through the watchdog, and stops when it loses it.
 *
 * Run 1: the nightly invoice export takes about 3.5 s, several times the 1 s lease. It takes
 * the lock without `leaseMs`, so the watchdog renews it every third of the lease for as long
 * as the job holds it: the PTTL printed after each batch never reaches 0. Had the process
 * crashed instead, the lock would have freed itself within one lease.
 *
 * Run 2: half-way through, an operator force-unlocks the job's lock from another LockClient.
 * The job passes `lease.signal` to every step, so it stops at the next renewal (the one that
 * finds the lock gone) instead of carrying on unprotected next to whoever takes the lock.
 *
 * The 1 s lease is there so renewals show within seconds; the default is 30 s.
 *
 * Run it against a Redis of your own:
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/batch-job-watchdog.ts
 * or with a throwaway redis-server:
 *   npm run example -- batch-job-watchdog
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { LockClient, LockLostError, type Lease, type Lock } from '../src/index.js';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;

const LEASE_MS = 1_000;
const BATCHES = 10;
const BATCH_MS = 350;
const FORCE_UNLOCK_AFTER_MS = 1_200;
const JOB_NAME = 'jobs:invoice-export:2024-06-30';

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function ms(value: number): string {
  return `${Math.round(value)} ms`.padStart(8);
}

/** Stands in for reading one page of invoices and writing it to the export file. */
async function exportBatch(signal: AbortSignal): Promise<void> {
  // A real step hands the signal on to its database driver or fetch(), so a lost lock
  // interrupts it mid-way rather than after it has written more.
  await sleep(BATCH_MS, undefined, { signal });
}

/** Exports every batch, reporting after each one; returns how many were exported. */
async function runExport(lease: Lease, report: (batch: number) => void | Promise<void>): Promise<number> {
  for (let batch = 1; batch <= BATCHES; batch += 1) {
    try {
      await exportBatch(lease.signal);
    } catch (error) {
      // An aborted step throws a bare AbortError; the signal's reason is the LockLostError
      // that says why, and that is what the caller branches on.
      if (lease.signal.aborted) throw lease.signal.reason;
      throw error;
    }
    await report(batch);
  }
  return BATCHES;
}

const redis = await createClient({ url }).connect();
const operatorRedis = await redis.duplicate().connect();
const locks = new LockClient(redis, { keyPrefix, watchdogTimeoutMs: LEASE_MS });
// The operator's tooling: another LockClient, as if on another machine.
const operator = new LockClient(operatorRedis, { keyPrefix });

let runStartedAt = 0;
let lastBatch = 0;
function logAt(text: string): void {
  console.log(`  ${ms(performance.now() - runStartedAt)}  ${text}`);
}
locks.on('lockLost', ({ error }) => {
  logAt(`lockLost event (reason ${error.reason}) during batch ${lastBatch + 1}`);
});

async function fullRun(exportLock: Lock): Promise<void> {
  console.log(`Run 1: the whole export, lease ${LEASE_MS} ms, renewed every ~${Math.round(LEASE_MS / 3)} ms`);
  console.log('   elapsed   batch  lock PTTL');
  runStartedAt = performance.now();
  const exported = await exportLock.withLock((lease) =>
    runExport(lease, async (batch) => {
      const pttl = await exportLock.remainingTtlMs();
      logAt(`${`${batch}/${BATCHES}`.padStart(6)}  ${ms(pttl ?? 0)}`);
      ensure(pttl !== null && pttl > 0, `the lock should still be held after batch ${batch}`);
    }),
  );
  const tookMs = performance.now() - runStartedAt;
  console.log(
    `  exported ${exported}/${BATCHES} batches in ${Math.round(tookMs)} ms, ${(tookMs / LEASE_MS).toFixed(1)} leases`,
  );
  ensure(tookMs > 3 * LEASE_MS, 'the job should outlast several leases');
  ensure(!(await exportLock.isLocked()), 'the lock should be released when the job ends');
}

async function interruptedRun(exportLock: Lock): Promise<void> {
  console.log(`Run 2: an operator force-unlocks the job ${FORCE_UNLOCK_AFTER_MS} ms in`);
  console.log('   elapsed  what happened');
  runStartedAt = performance.now();
  lastBatch = 0;
  const job = exportLock
    .withLock((lease) =>
      runExport(lease, (batch) => {
        lastBatch = batch;
        logAt(`batch ${batch}/${BATCHES} exported`);
      }),
    )
    .then(
      (exported) => ({ exported }),
      (error: unknown) => ({ error }),
    );

  await sleep(FORCE_UNLOCK_AFTER_MS);
  const forcedAt = performance.now();
  const deleted = await operator.lock(JOB_NAME).forceUnlock();
  logAt(`operator: forceUnlock() -> ${deleted}`);

  const outcome = await job;
  const stoppedAt = performance.now();
  ensure('error' in outcome, 'the job should not run to the end without its lock');
  ensure(outcome.error instanceof LockLostError, `expected a LockLostError, got ${String(outcome.error)}`);
  logAt(`job stopped after batch ${lastBatch}/${BATCHES}, with ${outcome.error.name}:`);
  console.log(`            ${outcome.error.message}`);
  console.log(`  noticed ${Math.round(stoppedAt - forcedAt)} ms after the force-unlock, at the next renewal`);
  ensure(lastBatch < BATCHES, 'the job should stop before its last batch');
  // One lease is the bound; the slack is for a busy machine's event loop.
  ensure(stoppedAt - forcedAt < 2 * LEASE_MS, 'the job should notice within about one lease');
}

try {
  const exportLock = locks.lock(JOB_NAME);
  await fullRun(exportLock);
  console.log('');
  await interruptedRun(exportLock);
  console.log('The watchdog kept the lock while the job ran, and the job stopped once it lost it.');
} finally {
  await Promise.all([locks.close(), operator.close()]);
  await Promise.all([redis.close(), operatorRedis.close()]);
}
