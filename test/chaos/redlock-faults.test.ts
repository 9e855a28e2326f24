/**
 * Redlock under real faults of its masters (each a redis-server of its own):
 * - a minority killed with SIGKILL: held leases stay held, new locks are granted, 0 overlaps,
 *   within one process and between two worker processes (stamped by the monotonic clock);
 * - the holder's own event loop blocked past its lease: it is told of the loss as soon as it
 *   runs, before another client's acquire resolves;
 * - a majority killed: every held lease is reported lost (signal aborted, `lockLost`) within its
 *   validity, and acquires fail within their bound with a typed error;
 * - a master frozen with SIGSTOP: locks are still granted and renewed, 0 overlaps, and after
 *   SIGCONT the late replies it sends do not disturb anything;
 * - more than a minority of the masters frozen past the lease one after another: the lease
 *   takes each back once it answers, and stays held; a lease that stalled past its end asks no
 *   master again.
 * `npm test` runs one fault cycle each; LATCHKEY_CHAOS=full runs many.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  LockError,
  LockLostError,
  LockTimeoutError,
  type Lease,
  type LockLostEvent,
  RedlockClient,
} from '../../src/index.js';
import { spawnWorker, type Worker, type WorkerMessage } from '../support/child.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { interceptCommands } from '../support/clients.js';
import { uniquePrefix } from '../support/keys.js';
import { ExclusionLog, startMasters, type Masters } from '../support/masters.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';
import { scaled } from './scale.js';

// A master's reply can take a few hundred milliseconds on a loaded two-core machine: with a
// 100 ms node timeout, masters whose replies were merely late dropped out of held locks.
const LEASE_MS = 3_000;
const NODE_TIMEOUT_MS = 250;
const OPTIONS = { watchdogTimeoutMs: LEASE_MS, nodeTimeoutMs: NODE_TIMEOUT_MS, retryDelayMs: 100 } as const;
const WORKER = new URL('./fixtures/redlock-worker.ts', import.meta.url).pathname;
/** Child processes start through tsx, which takes a while on a busy machine. */
const STARTUP_MS = 60_000;
const TEST_TIMEOUT_MS = scaled(60_000, 300_000);
/** How long the contenders get for their sections while a master is frozen. */
const FROZEN_LIMIT_MS = 120_000;
/** Timer lateness allowed on a loaded two-core machine. */
const SLACK_MS = 300;

/** Critical sections that began before an earlier one (of any process) had ended. */
function crossOverlaps(sections: readonly (readonly [bigint, bigint])[]): number {
  const sorted = [...sections].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  let count = 0;
  let maxEnd = -1n;
  for (const [start, end] of sorted) {
    if (start < maxEnd) count += 1;
    if (end > maxEnd) maxEnd = end;
  }
  return count;
}

function sectionsOf(done: WorkerMessage): [bigint, bigint][] {
  if (done['type'] !== 'done') throw new Error(`a worker failed: ${String(done['message'])}`);
  const raw = done['sections'];
  if (!Array.isArray(raw)) throw new Error('a worker reported no sections');
  return (raw as [string, string][]).map(([start, end]) => [BigInt(start), BigInt(end)]);
}

/**
 * Two workers per client contending for one lock until `sections` critical sections ran in all;
 * returns the exclusion log. Redlock promises no fairness (a round is a race among contenders),
 * so one worker may wait long while the others go on: what is checked is that the lock keeps
 * being granted, one holder at a time, not each worker's share.
 */
async function contend(
  clients: readonly RedlockClient[],
  name: string,
  sections: number,
  limitMs = 60_000,
): Promise<ExclusionLog> {
  const log = new ExclusionLog();
  const done = new AbortController();
  const worker = async (client: RedlockClient): Promise<void> => {
    while (log.entries < sections) {
      try {
        await client.lock(name).withLock(
          async () => {
            log.enter();
            await sleep(2);
            log.exit();
            if (log.entries >= sections) done.abort(new Error('enough sections'));
          },
          { waitMs: 10_000, signal: done.signal },
        );
      } catch (error) {
        // Waited out while the others went on, or told to stop: neither is a failure here.
        if (!done.signal.aborted && !(error instanceof LockTimeoutError)) throw error;
      }
    }
  };
  await within(
    Promise.all(clients.flatMap((client) => [worker(client), worker(client)])),
    limitMs,
    'workers',
  );
  expect(log.entries).toBeGreaterThanOrEqual(sections);
  return log;
}

describe.each([3, 5])('Redlock faults on %i masters', (count) => {
  let masters: Masters;
  const clients: RedlockClient[] = [];
  const minority = Math.floor((count - 1) / 2);
  const open = async (prefix: string): Promise<RedlockClient> => {
    const client = new RedlockClient(await masters.connect(), { ...OPTIONS, keyPrefix: prefix });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    masters = await startMasters(count);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    masters.closeClients();
    await masters.heal();
  });
  afterAll(async () => {
    await masters.stop();
  });

  it(
    `keeps working with ${minority} master(s) killed (kill -9), 0 overlaps`,
    async () => {
      const cycles = scaled(1, 6);
      let overlaps = 0;
      for (let cycle = 0; cycle < cycles; cycle += 1) {
        const prefix = uniquePrefix('redlock-kill');
        const a = await open(prefix);
        const b = await open(prefix);
        const lost: LockLostEvent[] = [];
        a.on('lockLost', (event) => lost.push(event));
        const held = await a.lock('held').acquire();
        // A different minority each cycle.
        const victims = Array.from({ length: minority }, (_, i) => (cycle + i) % count);
        // The kill lands while both clients contend for the lock.
        const running = contend([a, b], 'ledger', scaled(48, 120));
        await sleep(20);
        for (const victim of victims) await masters.kill(victim);
        overlaps += (await running).overlaps;
        overlaps += (await contend([a, b], 'ledger', scaled(32, 80))).overlaps;
        await sleep(LEASE_MS * 1.5);
        expect(held.signal.aborted).toBe(false);
        expect(lost).toEqual([]);
        await held.release();
        await Promise.all([a.close(), b.close()]);
        await masters.heal();
      }
      expect(overlaps).toBe(0);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'keeps two processes mutually exclusive while a minority of masters is killed under them',
    async () => {
      const prefix = uniquePrefix('redlock-procs');
      const workers: Worker[] = [];
      try {
        for (let i = 0; i < 2; i += 1) {
          workers.push(
            spawnWorker(WORKER, {
              MASTER_URLS: masters.servers.map((server) => server.url).join(','),
              KEY_PREFIX: prefix,
              LOCK_NAME: 'ledger',
            }),
          );
        }
        await Promise.all(workers.map((worker) => worker.next((msg) => msg['type'] === 'ready', STARTUP_MS)));
        const durationMs = scaled(3_000, 20_000);
        for (const worker of workers) worker.send({ type: 'loop', tasks: 2, durationMs, holdMs: 4 });
        const finished = Promise.all(
          workers.map((worker) =>
            worker.next((msg) => msg['type'] === 'done' || msg['type'] === 'failed', durationMs + 30_000),
          ),
        );
        // The minority goes down a third of the way in.
        await sleep(durationMs / 3);
        for (let i = 0; i < minority; i += 1) await masters.kill(i);
        const reports = await finished;
        const sections = reports.flatMap((report) => sectionsOf(report));
        expect(sections.length).toBeGreaterThan(20);
        expect(crossOverlaps(sections)).toBe(0);
      } finally {
        for (const worker of workers) worker.send({ type: 'exit' });
        await Promise.race([Promise.all(workers.map((worker) => worker.exited)), sleep(5_000)]);
      }
    },
    TEST_TIMEOUT_MS + STARTUP_MS,
  );

  it('tells a holder stalled past its lease of the loss as soon as it runs, before another client has the lock', async () => {
    const prefix = uniquePrefix('redlock-stall');
    const a = await open(prefix);
    const b = await open(prefix);
    const lease = await a.lock('stalled').acquire();
    let lostAt = 0n;
    lease.signal.addEventListener(
      'abort',
      () => {
        lostAt = process.hrtime.bigint();
      },
      { once: true },
    );
    // The holder's event loop is blocked past its lease (a long GC pause, a CPU-bound task): no
    // renewal goes out, and every master's key expires meanwhile.
    const stallUntil = performance.now() + LEASE_MS + 300;
    while (performance.now() < stallUntil) {
      // Busy: nothing else in this process runs.
    }
    const taken = await b.lock('stalled').acquire({ waitMs: 5_000 });
    const takenAt = process.hrtime.bigint();
    expect(lostAt).toBeGreaterThan(0n);
    expect(lostAt).toBeLessThan(takenAt);
    expect(lease.signal.reason).toBeInstanceOf(LockLostError);
    await expect(lease.release()).rejects.toBeInstanceOf(LockError);
    await taken.release();
  });

  it(
    'reports held leases lost within their validity once a majority is killed, and acquires fail within their bound',
    async () => {
      const prefix = uniquePrefix('redlock-majority');
      const a = await open(prefix);
      // Connected before the fault: a client cannot connect to a master that is down.
      const b = await open(prefix);
      const lost: { at: number; event: LockLostEvent }[] = [];
      a.on('lockLost', (event) => lost.push({ at: performance.now(), event }));
      const leases: Lease[] = await Promise.all(['p1', 'p2', 'p3'].map((name) => a.lock(name).acquire()));
      const aborted = leases.map(
        (lease) =>
          new Promise<number>((resolve) => {
            lease.signal.addEventListener('abort', () => resolve(performance.now()), { once: true });
          }),
      );
      const majority = Math.floor(count / 2) + 1;
      const killedAt = performance.now();
      await Promise.all(Array.from({ length: majority }, (_, i) => masters.kill(i)));
      const abortedAt = await within(Promise.all(aborted), LEASE_MS + 5_000, 'loss of the held leases');
      for (const at of abortedAt) {
        // Declared before the lease confirmed last could have run out on the survivors.
        expect(at - killedAt).toBeLessThanOrEqual(LEASE_MS + SLACK_MS);
      }
      for (const lease of leases) {
        expect(lease.signal.reason).toBeInstanceOf(LockLostError);
        expect((lease.signal.reason as LockLostError).reason).toBe('expired');
      }
      expect(lost.map((entry) => entry.event.name).sort()).toEqual(['p1', 'p2', 'p3']);

      const startedAt = performance.now();
      const attempt = await settle(b.lock('p4').acquire({ waitMs: 500 }));
      expect(attempt.error).toBeInstanceOf(LockError);
      expect((attempt.error as LockError).code).toBe('REDIS_ERROR');
      expect(attempt.at - startedAt).toBeLessThan(500 + 2 * NODE_TIMEOUT_MS + SLACK_MS);
      const once = await settle(b.lock('p5').tryAcquire());
      expect((once.error as LockError).code).toBe('REDIS_ERROR');
      expect(once.at - attempt.at).toBeLessThan(2 * NODE_TIMEOUT_MS + SLACK_MS);
      await expect(leases[0]?.release()).rejects.toBeInstanceOf(LockError);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'keeps working while a master is frozen (SIGSTOP), and after SIGCONT, 0 overlaps',
    async () => {
      const cycles = scaled(1, 5);
      let overlaps = 0;
      for (let cycle = 0; cycle < cycles; cycle += 1) {
        const prefix = uniquePrefix('redlock-pause');
        const a = await open(prefix);
        const b = await open(prefix);
        const lost: LockLostEvent[] = [];
        a.on('lockLost', (event) => lost.push(event));
        b.on('lockLost', (event) => lost.push(event));
        let renewFailures = 0;
        a.on('renewFailed', () => {
          renewFailures += 1;
        });
        const held = await a.lock('held').acquire();
        // A quorum is enough to hold the lock, so a master that answered late may not have it:
        // the frozen one must, or there is no renewal there to fail. A grant the client gave up
        // on is taken back once its late reply is in: read after a renewal interval.
        await sleep(LEASE_MS / 3);
        const holding = await Promise.all(
          masters.admin.map(async (admin) => Number(await admin.sendCommand(['EXISTS', held.key])) === 1),
        );
        const candidates = holding.flatMap((has, index) => (has ? [index] : []));
        const victim = candidates[cycle % candidates.length] ?? 0;
        // The pause lands while both clients contend for the lock. Each round that asks the frozen
        // master waits out the node timeout, and the two (or four) left split between four
        // contenders more often than not: fewer sections than with a master killed.
        // A section can take seconds then on a busy machine: fewer of them, and more time.
        const running = contend([a, b], 'ledger', scaled(8, 120), FROZEN_LIMIT_MS);
        await sleep(20);
        await masters.pause(victim);
        try {
          overlaps += (await running).overlaps;
          overlaps += (await contend([a, b], 'ledger', scaled(6, 80), FROZEN_LIMIT_MS)).overlaps;
          // Longer than a lease: the frozen master's hold lapses, the quorum keeps the lock.
          await sleep(LEASE_MS * 1.5);
          expect(held.signal.aborted).toBe(false);
          // Renewal kept going to every master, the frozen one included (failing there): one due
          // every third of a lease, each given up after the node timeout. A loaded machine runs
          // the timers late; one that never fails there times this wait out.
          await waitUntil('a renewal on the frozen master failed', () => renewFailures > 0, 10 * LEASE_MS);
          expect(held.signal.aborted).toBe(false);
        } finally {
          await masters.resume(victim);
        }
        // Its late replies (grants the clients gave up on) arrive now; work goes on unharmed.
        overlaps += (await contend([a, b], 'ledger', scaled(8, 80))).overlaps;
        expect(held.signal.aborted).toBe(false);
        expect(lost).toEqual([]);
        await held.release();
        await Promise.all([a.close(), b.close()]);
      }
      expect(overlaps).toBe(0);
    },
    4 * TEST_TIMEOUT_MS,
  );
  it(
    `takes back a master whose hold lapsed: a lease outlives freezes of ${minority + 1} masters, one after another`,
    async () => {
      const prefix = uniquePrefix('redlock-retake');
      const a = await open(prefix);
      const lost: LockLostEvent[] = [];
      a.on('lockLost', (event) => lost.push(event));
      const lease = await a.lock('retaken').acquire();
      // One more master than a minority, in turn: a lease that never took a lapsed master back
      // would be down to fewer than a quorum by the last freeze.
      for (let index = 0; index <= minority; index += 1) {
        const admin = masters.admin[index]!;
        const fieldsOf = (): Promise<string[]> => admin.sendCommand<string[]>(['HKEYS', lease.key]);
        const before = await fieldsOf();
        await masters.pause(index);
        // Past the lease: the client declares this master's hold lost. (Renewals it sent during
        // the freeze run on SIGCONT and may keep the old field one more lease; it is not renewed
        // after that.)
        await sleep(LEASE_MS + 1_000);
        await masters.resume(index);
        // Taken back: a new field, not the old one kept alive by the late renewals, and kept for
        // half a lease (the grant of an ask that timed out during the freeze also runs on SIGCONT,
        // and is cancelled at once).
        let seen: { readonly field: string; readonly at: number } | undefined;
        await waitUntil(
          `master ${index} grants "${lease.key}" to the lease again`,
          async () => {
            const fields = await fieldsOf();
            const field = fields.length === 1 && !before.includes(fields[0]!) ? fields[0] : undefined;
            if (field === undefined || field !== seen?.field) {
              seen = field === undefined ? undefined : { field, at: performance.now() };
              return false;
            }
            return performance.now() - seen.at >= LEASE_MS / 2;
          },
          4 * LEASE_MS,
        );
        expect(lease.signal.aborted).toBe(false);
      }
      expect(lost).toEqual([]);
      await lease.release();
      const held = await Promise.all(masters.admin.map((admin) => admin.sendCommand(['EXISTS', lease.key])));
      expect(held.filter((reply) => Number(reply) === 1).length).toBeLessThan(Math.floor(count / 2) + 1);
    },
    TEST_TIMEOUT_MS,
  );
  it('asks no master for the lock after a stall past its lease: the lease is lost first', async () => {
    const acquire = luaScripts['lock/acquire'];
    const isAcquire = (args: readonly string[]): boolean =>
      (args[0] === 'EVALSHA' && args[1] === acquire.sha1) ||
      (args[0] === 'EVAL' && args[1] === acquire.source);
    const prefix = uniquePrefix('redlock-stall-retake');
    // Master 0 is held by another owner (a round of another client's, say) for a little less
    // than the stall below: the lease misses it, and asks for it again every third of a lease.
    const admin = masters.admin[0]!;
    await admin.sendCommand(['HSET', `${prefix}stalled`, 'another-owner:1', '1']);
    await admin.sendCommand(['PEXPIRE', `${prefix}stalled`, String(LEASE_MS)]);
    let stalled = false;
    let askedBefore = 0;
    const asked: string[] = [];
    const connections = (await masters.connect()).map((connection, index) =>
      index === 0
        ? interceptCommands(connection, (args) => {
            // Asks only: an ask sent before the stall and timed out by it is cancelled after.
            if (!isAcquire(args)) return;
            if (stalled) asked.push(args[0] ?? '');
            else askedBefore += 1;
          })
        : connection,
    );
    const a = new RedlockClient(connections, { ...OPTIONS, keyPrefix: prefix });
    clients.push(a);
    const lease = await a.lock('stalled').acquire();
    expect(Number(await admin.sendCommand(['HEXISTS', lease.key, 'another-owner:1']))).toBe(1);
    // Refused by master 0 at least once more after the round: the lease is asking for it.
    const afterRound = askedBefore;
    await waitUntil('master 0 asked again', () => askedBefore > afterRound, LEASE_MS);
    // The holder's event loop is blocked past its lease: every master's hold lapses, and
    // master 0's other owner is gone by the end, so an ask would now be granted.
    const stallUntil = performance.now() + LEASE_MS + 300;
    while (performance.now() < stallUntil) {
      // Busy: nothing else in this process runs.
    }
    stalled = true;
    await sleep(LEASE_MS / 3 + SLACK_MS);
    expect(lease.signal.aborted).toBe(true);
    expect(asked).toEqual([]);
  });
});
