// Scenario "contended-8" / "contended-32": that many contenders spread over the worker
// processes fight for one key, holding it 1 ms (a real timer await), no think time, for a fixed
// time after a common start. A timing pass (direct to Redis; INFO deltas for commands and CPU)
// and a separate round-trip pass through the counting proxy. "semaphore-4": 8 contenders on a
// semaphore of 4 permits (semaphore contenders only), checked for never more than 4 holders.
import { nowNs } from '../ipc.js';
import { CountingProxy, totalOf, type Counts } from '../proxy.js';
import { costSince, serverCost } from '../redis.js';
import { jain, maxConcurrent, overlaps, round, type Interval } from '../stats.js';
import { emit, session, sleep, untilGo } from '../worker-state.js';
import {
  connect,
  disconnect,
  num,
  str,
  unhandledTotal,
  type Outcome,
  type RunContext,
  type Scenario,
  type WorkerOps,
} from './common.js';

interface TaskResult {
  /** Acquisitions that resolved before the deadline. */
  readonly inTime: number;
  /** All acquisitions, including those of the drain after the deadline. */
  readonly total: number;
  readonly maxWaitNs: number;
  /** Still waiting when the worker gave up on it (well after the deadline). */
  readonly stuck: boolean;
}

interface WorkerResult {
  readonly tasks: TaskResult[];
  readonly intervals: Interval[];
  /** Wait (acquire called to resolved) of every acquisition before the deadline, in ns. */
  readonly waitsNs: number[];
  readonly giveUps: number;
}

export const contendedOps: WorkerOps = {
  async 'contended.run'(args) {
    const locks = session(str(args, 'session'));
    const key = str(args, 'key');
    const tasks = num(args, 'tasks');
    const durationNs = num(args, 'durationMs') * 1e6;
    const graceMs = num(args, 'graceMs');
    const giveUpsBefore = locks.giveUps;
    emit({ event: 'ready' });
    await untilGo();
    const start = nowNs();
    const deadline = start + durationNs;
    const intervals: Interval[] = [];
    const waitsNs: number[] = [];
    const run = async (state: { inTime: number; total: number; maxWaitNs: number }): Promise<TaskResult> => {
      while (nowNs() < deadline) {
        const asked = nowNs();
        const held = await locks.acquire(key);
        const got = nowNs();
        state.maxWaitNs = Math.max(state.maxWaitNs, got - asked);
        state.total += 1;
        if (got <= deadline) {
          state.inTime += 1;
          waitsNs.push(got - asked);
        }
        await sleep(1);
        intervals.push([got, nowNs()]);
        await held.release();
      }
      return { ...state, stuck: false };
    };
    const results = await Promise.all(
      Array.from({ length: tasks }, async () => {
        const state = { inTime: 0, total: 0, maxWaitNs: 0 };
        const task = run(state);
        const abandon = new Promise<TaskResult>((resolve) => {
          // A task still waiting this long after the deadline has waited at least this long.
          const timer = setTimeout(
            () => resolve({ ...state, maxWaitNs: Math.max(state.maxWaitNs, nowNs() - start), stuck: true }),
            durationNs / 1e6 + graceMs,
          );
          void task.finally(() => clearTimeout(timer));
        });
        return Promise.race([task, abandon]);
      }),
    );
    const result: WorkerResult = {
      tasks: results,
      intervals,
      waitsNs,
      giveUps: locks.giveUps - giveUpsBefore,
    };
    return result;
  },
};

interface Pass {
  readonly workers: WorkerResult[];
  readonly elapsedMs: number;
  readonly commands: number;
  readonly cpuUs: number;
}

async function pass(
  context: RunContext,
  sessionName: string,
  key: string,
  contenders: number,
  durationMs: number,
  probe?: () => Promise<void>,
): Promise<Pass> {
  const { workers } = context;
  // A contender still waiting this long after the deadline is abandoned (and reported).
  const graceMs = context.quick ? 1_000 : 10_000;
  const perWorker = workers.map(
    (_, index) => Math.floor(contenders / workers.length) + (index < contenders % workers.length ? 1 : 0),
  );
  const ready = workers.map((worker) => worker.next((event) => event.event === 'ready', 60_000));
  const results = workers.map((worker, index) =>
    worker.call<WorkerResult>(
      { op: 'contended.run', session: sessionName, key, tasks: perWorker[index] ?? 0, durationMs, graceMs },
      durationMs + graceMs + 60_000,
    ),
  );
  await Promise.all(ready);
  const before = await serverCost(context.redis.admin);
  const started = performance.now();
  for (const worker of workers) worker.send({ go: true });
  // Halfway through, while every contender is busy: whatever the caller wants to look at.
  const probed = probe === undefined ? undefined : sleep(durationMs / 2).then(probe);
  const done = await Promise.all(results);
  await probed;
  const elapsedMs = performance.now() - started;
  const cost = costSince(before, await serverCost(context.redis.admin));
  return { workers: done, elapsedMs, commands: cost.commands, cpuUs: cost.cpuUs };
}

function acquisitions(result: Pass): number {
  return result.workers.reduce((sum, worker) => sum + worker.tasks.reduce((s, task) => s + task.total, 0), 0);
}

/** Counts by command for the md's breakdown: per acquisition, largest first. */
export function breakdown(counts: Counts, acquired: number): string {
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([name, count]) => `${name} ${round(count / acquired, 2)}`)
    .join(', ');
}

export interface ContentionOptions {
  /** Permits of a semaphore contender's semaphore; 1 (a mutex) by default. */
  readonly permits?: number;
  /** Names the sessions and keys; `contended-<contenders>` or `semaphore-<permits>` by default. */
  readonly label?: string;
  readonly durationMs?: number;
  readonly countedMs?: number;
  readonly warmupMs?: number;
  /** Called between the timing pass and the round-trip pass, no session open. */
  readonly beforeCounted?: () => Promise<void>;
  /** Called halfway through the round-trip pass (which is not timed), contenders all busy. */
  readonly probe?: () => Promise<void>;
}

export interface Contention {
  readonly outcome: Outcome;
  /** Waits of the timing pass's acquisitions before the deadline, in ns, every process's. */
  readonly waitsNs: number[];
}

async function runSize(context: RunContext, contenders: number, permits = 1): Promise<Outcome> {
  return (await contention(context, contenders, { permits })).outcome;
}

/** A timing pass and a round-trip pass of `contenders` on one key, checked and summed up. */
export async function contention(
  context: RunContext,
  contenders: number,
  options: ContentionOptions = {},
): Promise<Contention> {
  const permits = options.permits ?? 1;
  const durationMs = options.durationMs ?? (context.quick ? 1_000 : 5_000);
  const countedMs = options.countedMs ?? (context.quick ? 400 : 2_000);
  const warmupMs = options.warmupMs ?? (context.quick ? 200 : 300);
  const label = options.label ?? (permits === 1 ? `contended-${contenders}` : `semaphore-${permits}`);
  const key = `${context.keyPrefix}:${label}`;
  const before = await unhandledTotal(context.workers);
  const sessionName = label;
  await Promise.all(context.workers.map((worker) => connect(context, worker, sessionName, { permits })));
  await pass(context, sessionName, `${key}:w`, contenders, warmupMs);
  const timed = await pass(context, sessionName, key, contenders, durationMs);
  await Promise.all(context.workers.map((worker) => disconnect(worker, sessionName)));

  await options.beforeCounted?.();
  const proxy = await CountingProxy.start(context.redis.url);
  let counted: Pass;
  let counts: Counts;
  let warmupRoundTripsPerAcq: number;
  let unhandledInRun: number;
  try {
    const rtSession = `${sessionName}-rt`;
    await Promise.all(
      context.workers.map((worker) => connect(context, worker, rtSession, { url: proxy.url, permits })),
    );
    // The warm-up takes the same key as the counted pass: what a client does once per lock
    // (load its scripts, subscribe) falls in the warm-up, whose round trips per acquisition are
    // reported apart (warmupRoundTripsPerAcq).
    const warmup = await pass(context, rtSession, `${key}:r`, contenders, warmupMs);
    const warmupAcquired = acquisitions(warmup);
    warmupRoundTripsPerAcq = warmupAcquired === 0 ? -1 : round(totalOf(proxy.take()) / warmupAcquired, 3);
    counted = await pass(context, rtSession, `${key}:r`, contenders, countedMs, options.probe);
    counts = proxy.take();
    unhandledInRun = (await unhandledTotal(context.workers)) - before;
    await Promise.all(context.workers.map((worker) => disconnect(worker, rtSession)));
  } finally {
    await proxy.stop();
  }
  const unhandledAtClose = (await unhandledTotal(context.workers)) - before - unhandledInRun;

  const tasks = timed.workers.flatMap((worker) => worker.tasks);
  const acquired = acquisitions(timed);
  const inTime = tasks.reduce((sum, task) => sum + task.inTime, 0);
  const stuck = [...tasks, ...counted.workers.flatMap((worker) => worker.tasks)].filter(
    (task) => task.stuck,
  ).length;
  const allIntervals = [timed, counted].map((run) => run.workers.flatMap((worker) => worker.intervals));
  // A mutex: holds that overlap; a semaphore: holds beyond its permits at any instant.
  const overlapping =
    permits === 1
      ? allIntervals.reduce((sum, intervals) => sum + overlaps(intervals), 0)
      : Math.max(0, ...allIntervals.map((intervals) => maxConcurrent(intervals) - permits));
  const countedAcquired = acquisitions(counted);
  const giveUps = [...timed.workers, ...counted.workers].reduce((sum, worker) => sum + worker.giveUps, 0);
  const metrics = {
    acqPerSec: round(inTime / (durationMs / 1000), 1),
    roundTripsPerAcq: countedAcquired === 0 ? -1 : round(totalOf(counts) / countedAcquired, 3),
    warmupRoundTripsPerAcq,
    cmdsPerAcq: acquired === 0 ? -1 : round(timed.commands / acquired, 3),
    redisCpuUsPerAcq: acquired === 0 ? -1 : round(timed.cpuUs / acquired, 2),
    jain: round(jain(tasks.map((task) => task.inTime)), 4),
    maxWaitMs: round(Math.max(...tasks.map((task) => task.maxWaitNs)) / 1e6, 2),
    overlaps: overlapping,
    acquisitions: acquired,
    giveUps,
  };
  const notes = [
    `round trips by command, per acquisition: ${breakdown(counts, Math.max(1, countedAcquired))}`,
  ];
  if (stuck > 0) notes.push(`${stuck} contender(s) still waiting well after the deadline were abandoned`);
  if (unhandledAtClose > 0) {
    notes.push(
      `${unhandledAtClose} unhandled rejection(s) while its sessions were being closed (after measuring)`,
    );
  }
  if (giveUps > 0)
    notes.push(`the library gave up ${giveUps} time(s) at its defaults; the adapter asked again`);
  const waitsNs = timed.workers.flatMap((worker) => worker.waitsNs);
  const done = (outcome: Outcome): Contention => ({ outcome, waitsNs });
  if (overlapping > 0) {
    return done({
      status: 'failed',
      reason:
        permits === 1
          ? `mutual exclusion violated: ${overlapping} overlapping holds`
          : `more than ${permits} holders at once (${overlapping} too many)`,
      metrics,
    });
  }
  if (unhandledInRun > 0) {
    return done({
      status: 'failed',
      reason: `${unhandledInRun} unhandled rejection(s) during the runs`,
      metrics,
    });
  }
  if (acquired === 0) return done({ status: 'failed', reason: 'no acquisition completed', metrics });
  return done({ status: 'ok', metrics, notes });
}

/** Permits of the semaphore scenario: 8 contenders share 4. */
const SEMAPHORE_PERMITS = 4;

export const contended: Scenario = {
  names: ['contended-8', 'contended-32', `semaphore-${SEMAPHORE_PERMITS}`],
  skip: (adapter) => (adapter.caps.wait === 'none' ? 'floor: cannot wait for a held lock' : undefined),
  async run(context) {
    const { caps } = context.adapter;
    const skipped = (reason: string): Outcome => ({ status: 'skipped', reason });
    return {
      'contended-8': await runSize(context, 8),
      'contended-32':
        caps.kind !== undefined
          ? skipped('kinds are compared at 8 contenders')
          : // Keeps --quick under three minutes; no target is judged at 32.
            context.quick && context.adapter.name !== 'latchkey'
            ? skipped('quick run: 32 contenders for latchkey only (peers in a full run)')
            : await runSize(context, 32),
      [`semaphore-${SEMAPHORE_PERMITS}`]:
        caps.permits === true ? await runSize(context, 8, SEMAPHORE_PERMITS) : skipped('not a semaphore'),
    };
  },
};
