// Scenario "manyKeys-1000" / "manyKeys-10000": one session holds that many locks while a
// second session (same process) waits on each. Measures the server's subscribed channels, the
// client heap per lock (after GC), and the holder's Redis calls per renewal interval, counted by
// a proxy in front of the holder session only (its only traffic then is renewal).
import type { Held } from '../contenders/types.js';
import { CountingProxy, totalOf } from '../proxy.js';
import { costSince, pubsubChannels, serverCost } from '../redis.js';
import { round } from '../stats.js';
import { heapAfterGc, inBatches, session } from '../worker-state.js';
import {
  connect,
  disconnect,
  num,
  sleep,
  str,
  unhandledTotal,
  type Outcome,
  type RunContext,
  type Scenario,
  type WorkerOps,
} from './common.js';

let heapBefore = 0;
let holds: Held[] = [];
let waits: Promise<unknown>[] = [];

export const manyKeysOps: WorkerOps = {
  async 'manyKeys.hold'(args) {
    const holder = session(str(args, 'session'));
    const prefix = str(args, 'prefix');
    heapBefore = heapAfterGc();
    holds = await inBatches(num(args, 'count'), 200, (i) => holder.acquire(`${prefix}:${i}`));
    return null;
  },
  async 'manyKeys.wait'(args) {
    const waiter = session(str(args, 'session'));
    const prefix = str(args, 'prefix');
    const count = num(args, 'count');
    waits = [];
    for (let i = 0; i < count; i += 1) {
      // Ends in a rejection when the session closes under it; that is expected here.
      waits.push(waiter.acquire(`${prefix}:${i}`).catch(() => undefined));
      if (i % 500 === 499) await sleep(1);
    }
    return null;
  },
  'manyKeys.heap'() {
    // The holds and pending waits stay referenced until here, so GC cannot take them.
    const heap = heapAfterGc() - heapBefore;
    return Promise.resolve(holds.length + waits.length > 0 ? heap : 0);
  },
  async 'manyKeys.end'() {
    holds = [];
    waits = [];
    return Promise.resolve(null);
  },
};

/** Waits until the server's channel count stops moving (subscriptions done), within `ms`. */
export async function channelsSettled(context: RunContext, ms: number): Promise<number> {
  // The count keeps moving while subscriptions are still being made; a quick run takes half a
  // second without a change as done.
  const pollMs = context.quick ? 100 : 200;
  const quietMs = context.quick ? 500 : 800;
  const until = Date.now() + ms;
  let last = await pubsubChannels(context.redis.admin);
  let stableSince = Date.now();
  while (Date.now() < until) {
    await sleep(pollMs);
    const now = await pubsubChannels(context.redis.admin);
    if (now !== last) {
      last = now;
      stableSince = Date.now();
    } else if (Date.now() - stableSince >= quietMs) {
      break;
    }
  }
  return last;
}

async function runSize(context: RunContext, count: number): Promise<Outcome> {
  const { adapter } = context;
  const worker = context.workers[0];
  if (worker === undefined) throw new Error('no worker');
  // A short lease so renewals happen within seconds; a long one for contenders that never
  // renew, so no lock expires during the measurement.
  const leaseMs = adapter.caps.renews ? 3_000 : 120_000;
  const intervalMs = adapter.renewIntervalMs?.(leaseMs);
  const intervals = context.quick ? 2 : 5;
  const windowMs = intervalMs === undefined ? 2_000 : Math.max(2_000, intervals * intervalMs);
  const prefix = `${context.keyPrefix}:many-${count}`;
  const before = await unhandledTotal(context.workers);
  const holderProxy = await CountingProxy.start(context.redis.url);
  const notes: string[] = [];
  try {
    const channelsBefore = await pubsubChannels(context.redis.admin);
    await connect(context, worker, 'many-holder', { url: holderProxy.url, name: 'bench-holder', leaseMs });
    // The waiters talk to Redis directly: polling waiters would swamp a proxy in this process
    // and delay the holder's renewals through it.
    await connect(context, worker, 'many-waiter', { name: 'bench-waiter', leaseMs });
    await worker.call({ op: 'manyKeys.hold', session: 'many-holder', prefix, count });
    await worker.call({ op: 'manyKeys.wait', session: 'many-waiter', prefix, count });
    const channels = (await channelsSettled(context, 30_000)) - channelsBefore;
    holderProxy.take();
    const costBefore = await serverCost(context.redis.admin);
    await sleep(windowMs);
    const holderCalls = totalOf(holderProxy.take());
    const cost = costSince(costBefore, await serverCost(context.redis.admin));
    const heap = await worker.call<number>({ op: 'manyKeys.heap' });
    await worker.call({ op: 'manyKeys.end' });
    await disconnect(worker, 'many-waiter');
    await disconnect(worker, 'many-holder');
    const unhandled = (await unhandledTotal(context.workers)) - before;
    const metrics: Record<string, number> = {
      subscriptions: channels,
      heapBytesPerLock: round(heap / count, 0),
      serverCmdsPerSec: round(cost.commands / (windowMs / 1000), 1),
    };
    if (intervalMs === undefined) {
      notes.push('renewCallsPerInterval: no renewal (the lease is fixed at acquire)');
    } else {
      metrics['renewCallsPerInterval'] = round(holderCalls / (windowMs / intervalMs), 1);
      metrics['renewIntervalMs'] = intervalMs;
    }
    if (unhandled > 0) return { status: 'failed', reason: `${unhandled} unhandled rejection(s)`, metrics };
    return { status: 'ok', metrics, notes };
  } finally {
    await holderProxy.stop();
  }
}

export const manyKeys: Scenario = {
  names: ['manyKeys-1000', 'manyKeys-10000'],
  skip: (adapter) =>
    adapter.caps.wait === 'none'
      ? 'floor: cannot wait for a held lock'
      : adapter.caps.kind !== undefined
        ? 'kinds are compared on the cycle, the hand-off and 8 contenders'
        : undefined,
  async run(context) {
    const small = await runSize(context, 1_000);
    if (context.quick && context.adapter.name !== 'latchkey') {
      // Keeps --quick under three minutes; the full run measures every contender.
      return {
        'manyKeys-1000': small,
        'manyKeys-10000': { status: 'skipped', reason: 'quick run: 10,000 locks for latchkey only' },
      };
    }
    return {
      'manyKeys-1000': small,
      'manyKeys-10000': await runSize(context, 10_000),
    };
  },
};
