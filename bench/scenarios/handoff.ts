// Scenario "handoff": a holder in one process releases while a waiter in another is blocked in
// acquire; measured from just before release() is called to just after the waiter's acquire
// resolves, on the machine's monotonic clock (one clock for both processes).
import type { Held } from '../contenders/types.js';
import { nowNs, type WorkerHandle } from '../ipc.js';
import { latency, overlaps, round, type Interval } from '../stats.js';
import { emit, session } from '../worker-state.js';
import {
  connect,
  disconnect,
  sleep,
  str,
  unhandledTotal,
  type RunContext,
  type Scenario,
  type WorkerOps,
} from './common.js';

let current: { held: Held; since: number } | undefined;

export const handoffOps: WorkerOps = {
  async 'handoff.hold'(args) {
    const held = await session(str(args, 'session')).acquire(str(args, 'key'));
    const since = nowNs();
    current = { held, since };
    return since;
  },
  async 'handoff.wait'(args) {
    const locks = session(str(args, 'session'));
    const key = str(args, 'key');
    emit({ event: 'calling' });
    const held = await locks.acquire(key);
    const since = nowNs();
    current = { held, since };
    return since;
  },
  /** Releases the current hold; returns [hold start, the stamp taken right before release()]. */
  async 'handoff.release'() {
    if (current === undefined) throw new Error('nothing held');
    const { held, since } = current;
    current = undefined;
    const releasing = nowNs();
    await held.release();
    return [since, releasing];
  },
};

/** Steps run just before the holder releases and just after the waiter has the lock. */
export interface HandoffHooks {
  beforeRelease(): Promise<void>;
  acquired(): Promise<void>;
}

/**
 * One hand-off between the holder's and the waiter's sessions on `key`: the holder takes the
 * lock, the waiter calls acquire and is given `settleMs` to be blocked, the holder releases
 * (with `around`'s steps just before and once the waiter has the lock). Returns the hand-off
 * (ns) and both holds' [start, release called] stamps.
 */
export async function oneHandoff(
  holder: WorkerHandle,
  waiter: WorkerHandle,
  sessions: { readonly holder: string; readonly waiter: string },
  key: string,
  settleMs: number,
  around?: HandoffHooks,
): Promise<{ readonly handoffNs: number; readonly intervals: readonly Interval[] }> {
  await holder.call({ op: 'handoff.hold', session: sessions.holder, key });
  const calling = waiter.next((event) => event.event === 'calling', 30_000);
  const waited = waiter.call<number>({ op: 'handoff.wait', session: sessions.waiter, key }, 120_000);
  await calling;
  // Give the waiter time to be truly blocked (its first attempt answered, subscribed).
  await sleep(settleMs);
  await around?.beforeRelease();
  const [held, releasing] = await holder.call<[number, number]>({ op: 'handoff.release' });
  const acquired = await waited;
  await around?.acquired();
  const [waiterHeld, waiterReleasing] = await waiter.call<[number, number]>({ op: 'handoff.release' });
  return {
    handoffNs: acquired - releasing,
    intervals: [
      [held, releasing],
      [waiterHeld, waiterReleasing],
    ],
  };
}

/**
 * How long the waiter gets, after it reports calling acquire, to be blocked (its first attempt
 * answered, subscribed): a few ms unloaded; the quick run, done 200+ times per contender, gives
 * less margin.
 */
const SETTLE_MS = { full: 25, quick: 15 } as const;

export const handoff: Scenario = {
  names: ['handoff'],
  skip: (adapter) => (adapter.caps.wait === 'none' ? 'floor: cannot wait for a held lock' : undefined),
  async run(context: RunContext) {
    const { adapter } = context;
    const [holder, waiter] = context.workers;
    if (holder === undefined || waiter === undefined) throw new Error('need two workers');
    const slow = adapter.caps.wait === 'polling';
    const target = context.quick ? 100 : 500;
    // Polling peers take hundreds of ms per handoff: a quick run caps them at a few dozen.
    const capMs = context.quick ? (slow ? 5_000 : 30_000) : slow ? 90_000 : 180_000;
    const minimum = slow ? (context.quick ? 20 : 200) : target;

    const before = await unhandledTotal(context.workers);
    await connect(context, holder, 'handoff-holder');
    await connect(context, waiter, 'handoff-waiter');
    const key = `${context.keyPrefix}:handoff`;
    const handoffs: number[] = [];
    const intervals: Interval[] = [];
    const notes: string[] = [];
    const startedAt = Date.now();
    let slowest = 0;
    try {
      while (handoffs.length < target && Date.now() - startedAt < capMs) {
        const one = await oneHandoff(
          holder,
          waiter,
          { holder: 'handoff-holder', waiter: 'handoff-waiter' },
          key,
          context.quick ? SETTLE_MS.quick : SETTLE_MS.full,
        );
        intervals.push(...one.intervals);
        handoffs.push(one.handoffNs);
        slowest = Math.max(slowest, one.handoffNs);
      }
    } finally {
      await disconnect(holder, 'handoff-holder');
      await disconnect(waiter, 'handoff-waiter');
    }
    const unhandled = (await unhandledTotal(context.workers)) - before;
    const overlapping = overlaps(intervals);
    const summary = latency(handoffs);
    const metrics = {
      p50Ms: round(summary.p50Ms, 4),
      p90Ms: round(summary.p90Ms, 4),
      p99Ms: round(summary.p99Ms, 4),
      maxMs: round(summary.maxMs, 3),
      handoffs: handoffs.length,
    };
    if (handoffs.length < target) {
      notes.push(`measured ${handoffs.length} handoffs (target ${target}) within the ${capMs / 1000} s cap`);
    }
    if (overlapping > 0) {
      return {
        handoff: {
          status: 'failed',
          reason: `mutual exclusion violated: ${overlapping} overlapping holds`,
          metrics,
        },
      };
    }
    if (unhandled > 0) {
      return { handoff: { status: 'failed', reason: `${unhandled} unhandled rejection(s)`, metrics } };
    }
    if (handoffs.length < minimum) {
      return {
        handoff: {
          status: 'failed',
          reason: `only ${handoffs.length} handoffs within ${capMs / 1000} s (need ${minimum})`,
          metrics,
        },
      };
    }
    return { handoff: { status: 'ok', metrics, notes } };
  },
};
