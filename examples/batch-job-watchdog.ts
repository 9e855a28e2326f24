/**
 * A long batch job that keeps its lock through the watchdog, and stops when it loses it.
 *
 * Run 1: the nightly invoice export takes about 4 s, several times the 1 s lease. It takes
 * the lock without `leaseMs`, so the watchdog renews it every third of the lease for as long
 * as the job holds it. The example samples the lock's PTTL all along: it falls from 1000 ms
 * towards 667 ms and jumps back up to about 1000 ms at every renewal, so it never reaches 0.
 * Had the process crashed instead, the lock would have freed itself within one lease.
 *
 * Run 2: an operator force-unlocks the job's lock from another LockClient (as if from another
 * machine) as batch 3 starts. The job's next renewal, within a third of the lease, finds the
 * lock gone and aborts `lease.signal`. The job checks that signal before every batch, so it
 * finishes the batch in hand and starts no other: it does not carry on unprotected next to
 * whoever takes the lock next. (A batch shorter than the renewal interval could let one more
 * batch start before the loss is known; pass the signal into the step if that matters.)
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
import { LockClient, LockLostError, type Lease, type Lock } from 'latchkey';

const url = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';
// A prefix of its own, so the example never touches keys it did not create.
const keyPrefix = `examples:${randomBytes(4).toString('hex')}:`;

const LEASE_MS = 1_000;
const BATCHES = 8;
/** Longer than the renewal interval, so a loss is known before the batch in hand ends. */
const BATCH_MS = 500;
/** In run 2 the operator force-unlocks the lock as the batch after this one starts. */
const FORCE_UNLOCK_AFTER_BATCH = 2;
const JOB_NAME = 'jobs:invoice-export:2024-06-30';
/** How often run 1 reads the PTTL: several times per renewal interval. */
const SAMPLE_EVERY_MS = 20;
/** A PTTL this much above the previous sample was renewed (between samples it only falls). */
const RENEWAL_JUMP_MS = 50;

function ensure(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`Expectation failed: ${message}`);
}

function ms(value: number): string {
  return `${Math.round(value)} ms`.padStart(8);
}

/** Stands in for reading one page of invoices and writing it to the export file. */
async function exportBatch(): Promise<void> {
  // One page is written whole or not at all (a transaction, a file rename), so a batch is not
  // cut short; a step that can stop half-way should take `lease.signal` as well.
  await sleep(BATCH_MS);
}

/**
 * Exports every batch, reporting after each one; returns how many were exported. Before each
 * batch it checks `lease.signal`: once the lock is lost, no further batch starts.
 */
async function runExport(lease: Lease, report: (batch: number) => void | Promise<void>): Promise<number> {
  for (let batch = 1; batch <= BATCHES; batch += 1) {
    if (lease.signal.aborted) {
      logAt(`lease.signal aborted: batch ${batch}/${BATCHES} not started`);
      // The signal's reason is the LockLostError that says why; the caller branches on it.
      throw lease.signal.reason;
    }
    await exportBatch();
    await report(batch);
  }
  return BATCHES;
}

interface PttlSamples {
  /** The PTTL now, the lowest and the number of renewals seen since the last call. */
  take(): Promise<{ readonly now: number; readonly lowest: number; readonly renewals: number }>;
  stop(): Promise<void>;
}

/**
 * Reads the lock's PTTL every few milliseconds while the job runs. A renewal shows as the PTTL
 * going back up; between renewals it only goes down.
 */
function samplePttl(lock: Lock): PttlSamples {
  let stopped = false;
  let last: number | undefined;
  let lowest = Infinity;
  let renewals = 0;
  const record = (pttl: number | null): number => {
    const value = pttl ?? 0;
    if (last !== undefined && value > last + RENEWAL_JUMP_MS) renewals += 1;
    last = value;
    lowest = Math.min(lowest, value);
    return value;
  };
  const loop = (async () => {
    while (!stopped) {
      record(await lock.remainingTtlMs());
      await sleep(SAMPLE_EVERY_MS);
    }
  })();
  return {
    async take() {
      const now = record(await lock.remainingTtlMs());
      const taken = { now, lowest, renewals };
      lowest = now;
      renewals = 0;
      return taken;
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
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
  console.log('  The PTTL falls between renewals, and each renewal puts it back up to the lease.');
  console.log('   elapsed   batch  PTTL now  lowest since last row  renewals since last row');
  runStartedAt = performance.now();
  let renewals = 0;
  const exported = await exportLock.withLock(async (lease) => {
    const pttl = samplePttl(exportLock);
    try {
      return await runExport(lease, async (batch) => {
        const seen = await pttl.take();
        renewals += seen.renewals;
        const marks = seen.renewals === 0 ? '' : `${'↑'.repeat(seen.renewals)} renewed`;
        logAt(
          `${`${batch}/${BATCHES}`.padStart(6)}  ${ms(seen.now)}  ${ms(seen.lowest).padStart(21)}  ${marks}`,
        );
        ensure(seen.now > 0 && seen.lowest > 0, `the lock should have stayed held through batch ${batch}`);
      });
    } finally {
      await pttl.stop();
    }
  });
  const tookMs = performance.now() - runStartedAt;
  console.log(
    `  exported ${exported}/${BATCHES} batches in ${Math.round(tookMs)} ms, ${(tookMs / LEASE_MS).toFixed(1)} leases; ` +
      `the watchdog renewed the lock ${renewals} times`,
  );
  ensure(tookMs > 3 * LEASE_MS, 'the job should outlast several leases');
  // One renewal per third of the lease; the margin is for a busy machine's timers.
  ensure(
    renewals >= Math.floor(tookMs / (LEASE_MS / 3)) - 2,
    `expected a renewal every third of the lease, saw ${renewals}`,
  );
  ensure(!(await exportLock.isLocked()), 'the lock should be released when the job ends');
}

async function interruptedRun(exportLock: Lock): Promise<void> {
  const victim = FORCE_UNLOCK_AFTER_BATCH + 1;
  console.log(`Run 2: an operator force-unlocks the job from another LockClient as batch ${victim} starts`);
  console.log('   elapsed  what happened');
  runStartedAt = performance.now();
  lastBatch = 0;
  let forced: Promise<number> | undefined;
  const forceUnlock = async (): Promise<number> => {
    const at = performance.now();
    const deleted = await operator.lock(JOB_NAME).forceUnlock();
    logAt(`operator: forceUnlock() -> ${deleted}, while batch ${victim} runs`);
    return at;
  };
  const outcome = await exportLock
    .withLock((lease) =>
      runExport(lease, (batch) => {
        lastBatch = batch;
        logAt(`batch ${batch}/${BATCHES} exported`);
        // Not awaited: the operator acts from elsewhere while the job goes on.
        if (batch === FORCE_UNLOCK_AFTER_BATCH) forced = forceUnlock();
      }),
    )
    .then(
      (exported) => ({ exported }),
      (error: unknown) => ({ error }),
    );
  const stoppedAt = performance.now();
  ensure(forced !== undefined, 'the operator should have force-unlocked the lock');
  const forcedAt = await forced;

  ensure('error' in outcome, 'the job should not run to the end without its lock');
  ensure(outcome.error instanceof LockLostError, `expected a LockLostError, got ${String(outcome.error)}`);
  logAt(`job stopped after batch ${lastBatch}/${BATCHES}, with ${outcome.error.name}:`);
  console.log(`            ${outcome.error.message}`);
  console.log(
    `  batches ${lastBatch + 1}-${BATCHES} never started; the job stopped ${Math.round(stoppedAt - forcedAt)} ms ` +
      (lastBatch === victim
        ? 'after the force-unlock, at the end of the batch in hand'
        : `after the force-unlock: the loss became known only after batch ${lastBatch} had started`),
  );
  // The loss is known at the next renewal (a third of the lease), before the batch in hand
  // ends; on a machine too busy for that, one more batch may start, never two.
  ensure(
    lastBatch <= victim + 1,
    'the job should stop at the first batch boundary after it learns of the loss',
  );
  ensure(lastBatch < BATCHES, 'the job should stop before its last batch');
  ensure(
    stoppedAt - forcedAt < LEASE_MS + 2 * BATCH_MS,
    'the job should stop within about a batch of the loss',
  );
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
