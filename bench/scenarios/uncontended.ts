// Scenario "uncontended": acquire + release, one after another in one process, on one key
// ("uncontended") and on a fresh key each cycle ("uncontended-distinct"). Timed directly
// against Redis; round trips counted in a separate, shorter pass through the counting proxy.
import { nowNs } from '../ipc.js';
import { CountingProxy, totalOf } from '../proxy.js';
import { latency, round } from '../stats.js';
import { session } from '../worker-state.js';
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

export const uncontendedOps: WorkerOps = {
  /** Runs `cycles` acquire+release cycles; returns each cycle's duration in ns. */
  async 'uncontended.cycles'(args) {
    const locks = session(str(args, 'session'));
    const prefix = str(args, 'prefix');
    const distinct = args['distinct'] === true;
    const cycles = num(args, 'cycles');
    const durations: number[] = [];
    for (let i = 0; i < cycles; i += 1) {
      const key = distinct ? `${prefix}:${i}` : prefix;
      const start = nowNs();
      const held = await locks.acquire(key);
      await held.release();
      durations.push(nowNs() - start);
    }
    return durations;
  },
};

async function runVariant(context: RunContext, distinct: boolean): Promise<Outcome> {
  const worker = context.workers[0];
  if (worker === undefined) throw new Error('no worker');
  const cycles = context.quick ? 1_000 : 5_000;
  const warmup = context.quick ? 200 : 1_000;
  const countedCycles = context.quick ? 200 : 500;
  const variant = distinct ? 'distinct' : 'single';
  const prefix = `${context.keyPrefix}:unc:${variant}`;
  const before = await unhandledTotal(context.workers);

  await connect(context, worker, 'unc');
  await worker.call({
    op: 'uncontended.cycles',
    session: 'unc',
    prefix: `${prefix}:w`,
    distinct,
    cycles: warmup,
  });
  const started = nowNs();
  const durations = await worker.call<number[]>({
    op: 'uncontended.cycles',
    session: 'unc',
    prefix: `${prefix}:t`,
    distinct,
    cycles,
  });
  const elapsedNs = nowNs() - started;
  await disconnect(worker, 'unc');

  const proxy = await CountingProxy.start(context.redis.url);
  let roundTrips: number;
  try {
    await connect(context, worker, 'unc-rt', { url: proxy.url });
    await worker.call({
      op: 'uncontended.cycles',
      session: 'unc-rt',
      prefix: `${prefix}:rw`,
      distinct,
      cycles: 50,
    });
    proxy.take();
    await worker.call({
      op: 'uncontended.cycles',
      session: 'unc-rt',
      prefix: `${prefix}:r`,
      distinct,
      cycles: countedCycles,
    });
    roundTrips = totalOf(proxy.take()) / countedCycles;
    await disconnect(worker, 'unc-rt');
  } finally {
    await proxy.stop();
  }

  const unhandled = (await unhandledTotal(context.workers)) - before;
  const summary = latency(durations);
  const metrics = {
    p50Ms: round(summary.p50Ms, 4),
    p99Ms: round(summary.p99Ms, 4),
    opsPerSec: round(cycles / (elapsedNs / 1e9), 1),
    roundTripsPerCycle: round(roundTrips, 3),
    cycles,
  };
  if (unhandled > 0) {
    return { status: 'failed', reason: `${unhandled} unhandled rejection(s)`, metrics };
  }
  return { status: 'ok', metrics };
}

export const uncontended: Scenario = {
  names: ['uncontended', 'uncontended-distinct'],
  async run(context) {
    return {
      uncontended: await runVariant(context, false),
      'uncontended-distinct': await runVariant(context, true),
    };
  },
};
