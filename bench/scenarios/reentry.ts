// Scenario "reentry": while holding a lock, take it again as the same owner and give the inner
// hold back; the cost of that nested pair, for contenders that can re-enter at all.
import { nowNs } from '../ipc.js';
import { latency, round } from '../stats.js';
import { session } from '../worker-state.js';
import {
  connect,
  disconnect,
  num,
  str,
  unhandledTotal,
  type RunContext,
  type Scenario,
  type WorkerOps,
} from './common.js';

export const reentryOps: WorkerOps = {
  async 'reentry.cycles'(args) {
    const locks = session(str(args, 'session'));
    const cycles = num(args, 'cycles');
    const key = str(args, 'key');
    if (locks.withReentry === undefined) throw new Error('not reentrant');
    const durations: number[] = [];
    await locks.withReentry(key, async (reenter) => {
      for (let i = 0; i < cycles; i += 1) {
        const start = nowNs();
        const inner = await reenter();
        await inner.release();
        durations.push(nowNs() - start);
      }
    });
    return durations;
  },
};

export const reentry: Scenario = {
  names: ['reentry'],
  skip: (adapter) => (adapter.caps.reentrant ? undefined : 'not reentrant'),
  async run(context: RunContext) {
    const worker = context.workers[0];
    if (worker === undefined) throw new Error('no worker');
    const before = await unhandledTotal(context.workers);
    await connect(context, worker, 'reentry');
    const key = `${context.keyPrefix}:reentry`;
    await worker.call({ op: 'reentry.cycles', session: 'reentry', key: `${key}:w`, cycles: 200 });
    const cycles = context.quick ? 500 : 3_000;
    const durations = await worker.call<number[]>({ op: 'reentry.cycles', session: 'reentry', key, cycles });
    await disconnect(worker, 'reentry');
    const unhandled = (await unhandledTotal(context.workers)) - before;
    const summary = latency(durations);
    const metrics = { p50Ms: round(summary.p50Ms, 4), p99Ms: round(summary.p99Ms, 4), cycles };
    if (unhandled > 0) {
      return { reentry: { status: 'failed', reason: `${unhandled} unhandled rejection(s)`, metrics } };
    }
    return { reentry: { status: 'ok', metrics } };
  },
};
