// Scenario "manyKeys-1000" / "manyKeys-10000" / "manyKeys-100000": one session holds that many
// locks while a second session (same process) waits on each. Measures the server's subscribed
// channels, the client heap per held lock with its waiter (after GC; holder and waiter sessions
// apart and summed), the holder's Redis calls per renewal interval, counted by a proxy in front
// of the holder session only (its only traffic then is renewal), and whether any renewal came
// late: the lowest PTTL of a few hundred sampled lock keys during the window, and the holds the
// library reported lost. The 100,000 point runs in a full run, for latchkey only, and without
// waiters: it measures renewal of held locks. floor-pubsub (a held lock is one key, a waiter one
// queued token, one subscribed channel and one pending promise) runs beside latchkey in a quick
// run too: its heap per lock is what the harness and node-redis keep alone, the heap's floor.
// For latchkey, a semaphore waiter and a latch waiter per key are weighed the same way after the
// locks (many-keys-kinds.ts).
import type { Held } from '../contenders/types.js';
import { CountingProxy, totalOf } from '../proxy.js';
import { costSince, pubsubChannels, serverCost, type Admin } from '../redis.js';
import { round } from '../stats.js';
import { heapAfterGc, inBatches, lowestHeapAfterGc, session } from '../worker-state.js';
import { kindWaiterHeaps } from './many-keys-kinds.js';
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

/** Lock keys whose PTTL is sampled, spread evenly over the held locks. */
const SAMPLED_KEYS = 256;
/** Time between two rounds of PTTL samples (one pipelined PTTL per sampled key). */
const SAMPLE_EVERY_MS = 100;

/** Heap samples after the window, the lowest of which is reported, and the time between them. */
const HEAP_SAMPLES = 3;
const HEAP_SAMPLE_EVERY_MS = 500;

let heapBefore = 0;
/** Heap after GC once every lock is held, before any waiter: the holder session's share. */
let heapHeld = 0;
let holderSession = '';
let holds: Held[] = [];
let waits: Promise<unknown>[] = [];

function isHeld(value: unknown): value is Held {
  return typeof value === 'object' && value !== null && typeof (value as Held).release === 'function';
}

export const manyKeysOps: WorkerOps = {
  async 'manyKeys.hold'(args) {
    holderSession = str(args, 'session');
    const holder = session(holderSession);
    const prefix = str(args, 'prefix');
    heapBefore = heapAfterGc();
    holds = await inBatches(num(args, 'count'), 200, (i) => holder.acquire(`${prefix}:${i}`));
    heapHeld = heapAfterGc();
    return null;
  },
  async 'manyKeys.wait'(args) {
    const waiter = session(str(args, 'session'));
    const prefix = str(args, 'prefix');
    const count = num(args, 'count');
    waits = [];
    for (let i = 0; i < count; i += 1) {
      // A library that gives up at its defaults rejects; that is expected here.
      waits.push(waiter.acquire(`${prefix}:${i}`).catch(() => undefined));
      if (i % 500 === 499) await sleep(1);
    }
    return null;
  },
  /** Redis keys of up to `count` held locks spread over all of them (none if not told). */
  'manyKeys.keys'(args) {
    const count = Math.min(num(args, 'count'), holds.length);
    const keys: string[] = [];
    for (let i = 0; i < count; i += 1) {
      const key = holds[Math.floor((i * holds.length) / count)]?.redisKey;
      if (key !== undefined) keys.push(key);
    }
    return Promise.resolve(keys);
  },
  /** Holds the holder session's library reported lost since it connected; null if it cannot tell. */
  'manyKeys.lost'() {
    return Promise.resolve(session(holderSession).locksLost ?? null);
  },
  /**
   * [holder share, holder and waiter together]: heap after GC above the start, in bytes; the
   * lowest of a few samples, so requests that happen to be in flight at one of them (waiters
   * re-checking a lock at the expiry they last saw, a renewal) are not counted as kept.
   */
  async 'manyKeys.heap'() {
    // The holds and pending waits stay referenced until here, so GC cannot take them.
    const heap = await lowestHeapAfterGc(HEAP_SAMPLES, HEAP_SAMPLE_EVERY_MS);
    return holds.length > 0 ? [heapHeld - heapBefore, heap - heapBefore] : [0, 0];
  },
  /**
   * Winds down as an application would, so no library is left renewing or waiting over a session
   * about to close: gives every hold back, lets each waiter take its lock (within `waitMs`), and
   * gives those back too. Failures are ignored: the measuring is over.
   */
  async 'manyKeys.release'(args) {
    const release = (held: unknown): Promise<unknown> =>
      isHeld(held) ? held.release().catch(() => undefined) : Promise.resolve();
    await inBatches(holds.length, 200, (i) => release(holds[i]));
    const settled = Promise.all(waits);
    const acquired = await Promise.race([settled, sleep(num(args, 'waitMs')).then(() => undefined)]);
    if (acquired !== undefined) await inBatches(acquired.length, 200, (i) => release(acquired[i]));
    return null;
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

interface PttlSamples {
  /** Lowest PTTL (ms) a sampled key showed while it had one; undefined if none had one. */
  min: number | undefined;
  /** PTTL replies read. */
  replies: number;
  /** Sampled keys that were gone (PTTL -2) at least once: a lock that expired or was freed. */
  readonly gone: Set<string>;
}

/** Reads every key's PTTL each {@link SAMPLE_EVERY_MS} until `stop()` says so. */
async function samplePttl(admin: Admin, keys: readonly string[], stop: () => boolean): Promise<PttlSamples> {
  const samples: PttlSamples = { min: undefined, replies: 0, gone: new Set() };
  while (!stop()) {
    const roundStart = Date.now();
    const replies = await Promise.all(keys.map((key) => admin.sendCommand(['PTTL', key])));
    replies.forEach((reply, i) => {
      samples.replies += 1;
      const pttl = Number(reply);
      const key = keys[i];
      if (pttl === -2 && key !== undefined) samples.gone.add(key);
      else if (pttl >= 0) samples.min = samples.min === undefined ? pttl : Math.min(samples.min, pttl);
    });
    await sleep(Math.max(0, SAMPLE_EVERY_MS - (Date.now() - roundStart)));
  }
  return samples;
}

async function runSize(context: RunContext, count: number, waiters: boolean): Promise<Outcome> {
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
  const started = Date.now();
  try {
    const channelsBefore = await pubsubChannels(context.redis.admin);
    await connect(context, worker, 'many-holder', { url: holderProxy.url, name: 'bench-holder', leaseMs });
    // The waiters talk to Redis directly: polling waiters would swamp a proxy in this process
    // and delay the holder's renewals through it.
    if (waiters) await connect(context, worker, 'many-waiter', { name: 'bench-waiter', leaseMs });
    await worker.call({ op: 'manyKeys.hold', session: 'many-holder', prefix, count });
    const holdSeconds = (Date.now() - started) / 1000;
    if (waiters) await worker.call({ op: 'manyKeys.wait', session: 'many-waiter', prefix, count });
    const channels = (await channelsSettled(context, 30_000)) - channelsBefore;
    const keys = await worker.call<string[]>({ op: 'manyKeys.keys', count: SAMPLED_KEYS });
    holderProxy.take();
    const costBefore = await serverCost(context.redis.admin);
    let stopped = false;
    const sampling = samplePttl(context.redis.admin, keys, () => stopped);
    await sleep(windowMs);
    stopped = true;
    const samples = await sampling;
    const holderCalls = totalOf(holderProxy.take());
    const cost = costSince(costBefore, await serverCost(context.redis.admin));
    const lost = await worker.call<number | null>({ op: 'manyKeys.lost' });
    const [holderHeap, heap] = await worker.call<[number, number]>({ op: 'manyKeys.heap' });
    // Holds released, waiters served and released, then the sessions close.
    await worker.call({ op: 'manyKeys.release', waitMs: 60_000 }, 300_000);
    await worker.call({ op: 'manyKeys.end' });
    // latchkey's semaphore and latch waiters, on the same sessions once the locks are given back.
    const kinds = waiters
      ? await kindWaiterHeaps(worker, { holder: 'many-holder', waiter: 'many-waiter' }, prefix, count, () =>
          channelsSettled(context, 30_000),
        )
      : { metrics: {}, notes: [] };
    notes.push(...kinds.notes);
    if (waiters) await disconnect(worker, 'many-waiter');
    await disconnect(worker, 'many-holder');
    const unhandled = (await unhandledTotal(context.workers)) - before;
    const metrics: Record<string, number> = { subscriptions: channels };
    // With waiters, both sessions: what one held lock with one waiter costs the client side.
    if (waiters) metrics['heapBytesPerLock'] = round(heap / count, 0);
    else notes.push('no waiters at this size: the holder session alone (holderHeapBytesPerLock)');
    metrics['holderHeapBytesPerLock'] = round(holderHeap / count, 0);
    if (waiters) metrics['waiterHeapBytesPerLock'] = round((heap - holderHeap) / count, 0);
    Object.assign(metrics, kinds.metrics);
    // The sampler's own PTTL calls are not the contender's.
    metrics['serverCmdsPerSec'] = round((cost.commands - samples.replies) / (windowMs / 1000), 1);
    metrics['leaseMs'] = leaseMs;
    if (intervalMs === undefined) {
      notes.push('renewCallsPerInterval: no renewal (the lease is fixed at acquire)');
    } else {
      const perInterval = holderCalls / (windowMs / intervalMs);
      metrics['renewCallsPerInterval'] = round(perInterval, 1);
      metrics['renewCallsPer1000Locks'] = round(perInterval / (count / 1000), 3);
      metrics['renewIntervalMs'] = intervalMs;
    }
    if (keys.length === 0) {
      notes.push('minPttlMs: not sampled (the contender does not tell its lock keys)');
    } else {
      if (samples.min !== undefined) metrics['minPttlMs'] = samples.min;
      metrics['sampledKeys'] = keys.length;
      metrics['sampledKeysGone'] = samples.gone.size;
    }
    if (lost === null) notes.push('holdsLost: the contender does not report a lost lock');
    else metrics['holdsLost'] = lost;
    metrics['holdSeconds'] = round(holdSeconds, 1);
    metrics['seconds'] = round((Date.now() - started) / 1000, 1);
    if (unhandled > 0) return { status: 'failed', reason: `${unhandled} unhandled rejection(s)`, metrics };
    return { status: 'ok', metrics, notes };
  } finally {
    await holderProxy.stop();
  }
}

const SIZES = [1_000, 10_000, 100_000] as const;

export const manyKeys: Scenario = {
  names: SIZES.map((size) => `manyKeys-${size}`),
  skip: (adapter) =>
    adapter.caps.wait === 'none'
      ? 'floor: cannot wait for a held lock'
      : adapter.caps.kind !== undefined
        ? 'kinds are compared on the cycle, the hand-off and 8 contenders'
        : undefined,
  async run(context) {
    const wanted = context.wanted ?? ((): boolean => true);
    const outcomes: Record<string, Outcome> = {};
    for (const size of SIZES) {
      const name = `manyKeys-${size}`;
      if (!wanted(name)) continue;
      const latchkey = context.adapter.name === 'latchkey';
      // The heap's floor (floor-pubsub) is measured in every run, so the heap target can tell
      // latchkey's own share from the harness's and the client's.
      const floor = context.adapter.caps.floor;
      // Keeps --quick under three minutes; the full run measures every contender up to 10,000.
      // A quick run measures the floor at the point the heap target reads (10,000 locks) only.
      if (context.quick && floor && size !== 10_000)
        outcomes[name] = { status: 'skipped', reason: 'quick run: the heap floor at 10,000 locks only' };
      else if (context.quick && !latchkey && !floor)
        outcomes[name] = {
          status: 'skipped',
          reason: 'quick run: latchkey and its heap floor only (peers in a full run)',
        };
      else if (size === 100_000 && context.quick)
        outcomes[name] = { status: 'skipped', reason: 'quick run: 100,000 locks in a full run only' };
      else if (size === 100_000 && !latchkey)
        outcomes[name] = {
          status: 'skipped',
          reason: '100,000 locks for latchkey only (its renewal target; peers are compared up to 10,000)',
        };
      // 100,000 waiters in the holder's process took gigabytes of heap and starved its
      // renewals; the renewal target is about held locks, so the holder runs alone there.
      else outcomes[name] = await runSize(context, size, size < 100_000);
    }
    return outcomes;
  },
};
