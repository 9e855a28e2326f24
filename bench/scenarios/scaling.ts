// Scenario "scaling": two curves of points, each point its own scenario name.
//   scaling-contenders-<n>: n contenders over the worker processes on one key (the contended
//     run of contended.ts at each size), plus the heap of the processes (after GC) and the
//     server's pubsub channels, both looked at halfway through the (untimed) round-trip pass.
//   scaling-keys-<n>: one session (worker 0) holds n keys while a second (worker 1) waits on
//     each; then the holder releases them all, 200 at a time, and each waiter takes its key:
//     hand-offs per second, the wait from release() called to the waiter's acquire resolved, and
//     per hand-off the requests, Redis commands and CPU; the heap of both sessions per key (after
//     GC) and the channels subscribed while every waiter waits. A timing pass direct to Redis,
//     then a round-trip pass through the counting proxy, at the same size.
import type { Held } from '../contenders/types.js';
import { nowNs } from '../ipc.js';
import { CountingProxy, type Counts } from '../proxy.js';
import {
  CONTENDER_POINTS,
  KEY_POINTS,
  QUICK_CONTENDER_POINTS,
  QUICK_KEY_POINTS,
  SCALING_CONTENDERS,
  contenderPoint,
  keyPoint,
} from '../scaling-points.js';
import { costSince, pubsubChannels, serverCost } from '../redis.js';
import { latency, round } from '../stats.js';
import { heapAfterGc, inBatches, lowestHeapAfterGc, session, sleep } from '../worker-state.js';
import { breakdown, contention } from './contended.js';
import {
  connect,
  disconnect,
  num,
  str,
  unhandledTotal,
  type Metrics,
  type Outcome,
  type RunContext,
  type Scenario,
  type WorkerOps,
} from './common.js';
import { channelsSettled } from './many-keys.js';

/** Releases (and waiter clean-ups) in flight at once in the keys curve. */
const RELEASE_WIDTH = 200;

interface Collected {
  readonly gotNs: number[];
  readonly errors: number;
  readonly firstError: string;
}

// ---- worker side ----------------------------------------------------------------------------

let heapBase = 0;
let holds: Held[] = [];
let waiting: Promise<unknown>[] = [];
let waiterHolds: (Held | undefined)[] = [];
let gotNs: number[] = [];
let waitErrors: string[] = [];

/**
 * Waiters started per pause and the pause (ms). Started all at once, 100,000 first attempts
 * queue on one connection past the library's 5 s call timeout; 10,000 a second is well within
 * what the server answers, and a thousand start at once as before.
 */
const WAIT_BATCH = 500;
const waitPauseMs = (count: number): number => (count > 10_000 ? 50 : 1);

export const scalingOps: WorkerOps = {
  'scaling.heap'() {
    return Promise.resolve(heapAfterGc());
  },
  async 'scaling.hold'(args) {
    const holder = session(str(args, 'session'));
    const prefix = str(args, 'prefix');
    if (args['heap'] === true) heapBase = await lowestHeapAfterGc();
    holds = await inBatches(num(args, 'count'), RELEASE_WIDTH, (i) => holder.acquire(`${prefix}:${i}`));
    return null;
  },
  async 'scaling.wait'(args) {
    const waiter = session(str(args, 'session'));
    const prefix = str(args, 'prefix');
    const count = num(args, 'count');
    if (args['heap'] === true) heapBase = await lowestHeapAfterGc();
    gotNs = new Array<number>(count).fill(-1);
    waiterHolds = new Array<Held | undefined>(count).fill(undefined);
    waiting = [];
    waitErrors = [];
    for (let i = 0; i < count; i += 1) {
      waiting.push(
        waiter.acquire(`${prefix}:${i}`).then(
          (held) => {
            gotNs[i] = nowNs();
            waiterHolds[i] = held;
          },
          (error: unknown) => {
            waitErrors.push(error instanceof Error ? error.message : String(error));
          },
        ),
      );
      if (i % WAIT_BATCH === WAIT_BATCH - 1) await sleep(waitPauseMs(count));
    }
    return null;
  },
  /**
   * Heap now (after GC) less the heap before this process's sessions held or waited, each the
   * lowest of a few samples: with one sample each, what the round before was still letting go
   * of made the heap before read higher than after at 1,000 keys (a negative delta).
   */
  async 'scaling.heapDelta'() {
    // holds and waiting are still referenced here, so GC cannot take them.
    const heap = (await lowestHeapAfterGc()) - heapBase;
    return holds.length + waiting.length > 0 ? heap : 0;
  },
  /** Releases every hold, `RELEASE_WIDTH` at a time; the stamp right before each release(). */
  async 'scaling.release'() {
    const releasing = new Array<number>(holds.length).fill(-1);
    const current = holds;
    holds = [];
    await inBatches(current.length, RELEASE_WIDTH, async (i) => {
      const held = current[i];
      if (held === undefined) return;
      releasing[i] = nowNs();
      await held.release();
    });
    return releasing;
  },
  /** Each waiter's stamp on acquiring (-1: not within `timeoutMs`), and the waits that failed. */
  async 'scaling.collect'(args) {
    const all = Promise.all(waiting);
    await Promise.race([all, sleep(num(args, 'timeoutMs'))]);
    const collected: Collected = { gotNs, errors: waitErrors.length, firstError: waitErrors[0] ?? '' };
    return collected;
  },
  /** Releases what the waiters took (not measured) and forgets everything. */
  async 'scaling.end'() {
    const current = waiterHolds;
    waiterHolds = [];
    waiting = [];
    gotNs = [];
    holds = [];
    await inBatches(current.length, RELEASE_WIDTH, async (i) => current[i]?.release());
    return null;
  },
};

// ---- parent side: contenders on one key -------------------------------------------------------

async function heapOfWorkers(context: RunContext): Promise<number> {
  const heaps = await Promise.all(
    context.workers.map((worker) => worker.call<number>({ op: 'scaling.heap' })),
  );
  return heaps.reduce((a, b) => a + b, 0);
}

async function contendersPoint(context: RunContext, contenders: number): Promise<Outcome> {
  const label = contenderPoint(contenders);
  let channelsBefore = 0;
  let heapBytes = -1;
  let channels = -1;
  const { outcome, waitsNs } = await contention(context, contenders, {
    label,
    durationMs: context.quick ? 800 : 5_000,
    countedMs: context.quick ? 400 : 2_000,
    warmupMs: context.quick ? 150 : 300,
    // Between the passes no session is open: the server's channels then are the baseline.
    beforeCounted: async () => {
      channelsBefore = await pubsubChannels(context.redis.admin);
    },
    probe: async () => {
      channels = (await pubsubChannels(context.redis.admin)) - channelsBefore;
      // The whole heap, not a delta: what a waiter adds is far below the GC's own noise, so a
      // delta from before the pass can come out negative; the whole shows whether it grows.
      heapBytes = await heapOfWorkers(context);
    },
  });
  if (outcome.status === 'skipped') return outcome;
  const base = outcome.metrics ?? {};
  const wait = latency(waitsNs);
  const metrics: Metrics = {
    acqPerSec: base['acqPerSec'] ?? -1,
    waitP50Ms: round(wait.p50Ms, 3),
    waitP99Ms: round(wait.p99Ms, 3),
    roundTripsPerAcq: base['roundTripsPerAcq'] ?? -1,
    cmdsPerAcq: base['cmdsPerAcq'] ?? -1,
    redisCpuUsPerAcq: base['redisCpuUsPerAcq'] ?? -1,
    clientHeapKB: round(heapBytes / 1024, 0),
    subscriptions: channels,
    acquisitions: base['acquisitions'] ?? 0,
    giveUps: base['giveUps'] ?? 0,
  };
  return outcome.status === 'ok'
    ? { status: 'ok', metrics, notes: outcome.notes ?? [] }
    : { status: 'failed', reason: outcome.reason, metrics };
}

// ---- parent side: distinct keys ---------------------------------------------------------------

interface KeysPass {
  readonly acquired: number;
  /** Requests by command over the release phases (through the proxy only). */
  readonly byCommand: Counts;
  readonly missing: number;
  /** Waits that ended in an error (and the first one's message). */
  readonly errors: number;
  readonly firstError: string;
  /** Waiters that acquired before their key's release was called. */
  readonly early: number;
  readonly waitsNs: number[];
  readonly spanNs: number;
  readonly commands: number;
  readonly cpuUs: number;
  readonly requests: number;
  readonly heapBytes: number;
  readonly channels: number;
}

/**
 * Hand-offs wanted at least per point: below that many keys the hold-wait-release round is
 * repeated (channels and heap looked at in the first round only), so a point of 1 key still has
 * percentiles.
 */
const MIN_HANDOFFS = { quick: 40, full: 200 } as const;
/** After the first round, how long the waiters get to be blocked before the release (ms). */
const ROUND_SETTLE_MS = 25;

async function keysPass(
  context: RunContext,
  count: number,
  label: string,
  proxy: CountingProxy | undefined,
): Promise<KeysPass> {
  const [holder, waiter] = context.workers;
  if (holder === undefined || waiter === undefined) throw new Error('need two workers');
  const url = proxy?.url;
  const rounds = Math.ceil((context.quick ? MIN_HANDOFFS.quick : MIN_HANDOFFS.full) / count);
  const channelsBefore = await pubsubChannels(context.redis.admin);
  await connect(context, holder, `${label}-holder`, { url, name: 'bench-holder' });
  await connect(context, waiter, `${label}-waiter`, { url, name: 'bench-waiter' });
  const waitsNs: number[] = [];
  let early = 0;
  let missing = 0;
  let spanNs = 0;
  let commands = 0;
  let cpuUs = 0;
  let requests = 0;
  let heapBytes = 0;
  let channels = 0;
  let errors = 0;
  let firstError = '';
  const byCommand = new Map<string, number>();
  try {
    // Setting up 100,000 holds and waits takes a while on a small machine.
    const setupMs = 60_000 + count;
    const timeoutMs = (context.quick ? 15_000 : 120_000) + count;
    // What one INFO snapshot itself costs the server, taken off each round's CPU: at one key a
    // round is a single hand-off, and two INFO calls would otherwise weigh more than it does.
    const infoCpuUs = costSince(
      await serverCost(context.redis.admin),
      await serverCost(context.redis.admin),
    ).cpuUs;
    for (let round = 0; round < rounds; round += 1) {
      const prefix = `${context.keyPrefix}:${label}:${round}`;
      // The heap is looked at in one round only (a full GC takes a while): the last, when the
      // code is warm and earlier rounds' garbage is gone.
      const heap = round === rounds - 1;
      await holder.call({ op: 'scaling.hold', session: `${label}-holder`, prefix, count, heap }, setupMs);
      await waiter.call({ op: 'scaling.wait', session: `${label}-waiter`, prefix, count, heap }, setupMs);
      if (round === 0)
        channels = (await channelsSettled(context, context.quick ? 15_000 : 60_000)) - channelsBefore;
      else await sleep(ROUND_SETTLE_MS);
      if (heap) {
        const heaps = await Promise.all(
          [holder, waiter].map((w) => w.call<number>({ op: 'scaling.heapDelta' })),
        );
        heapBytes = (heaps[0] ?? 0) + (heaps[1] ?? 0);
      }
      const costBefore = await serverCost(context.redis.admin);
      proxy?.take();
      const [released, collected] = await Promise.all([
        holder.call<number[]>({ op: 'scaling.release' }, timeoutMs + 60_000),
        waiter.call<Collected>({ op: 'scaling.collect', timeoutMs }, timeoutMs + 60_000),
      ]);
      const got = collected.gotNs;
      errors += collected.errors;
      if (firstError === '') firstError = collected.firstError;
      if (proxy !== undefined)
        for (const [name, calls] of proxy.take()) {
          byCommand.set(name, (byCommand.get(name) ?? 0) + calls);
          requests += calls;
        }
      const cost = costSince(costBefore, await serverCost(context.redis.admin));
      commands += cost.commands;
      cpuUs += Math.max(0, cost.cpuUs - infoCpuUs);
      await waiter.call({ op: 'scaling.end' }, setupMs);
      let first = Number.POSITIVE_INFINITY;
      let last = Number.NEGATIVE_INFINITY;
      got.forEach((at, i) => {
        const from = released[i] ?? -1;
        if (at < 0 || from < 0) {
          missing += 1;
          return;
        }
        if (at < from) early += 1;
        waitsNs.push(at - from);
        first = Math.min(first, from);
        last = Math.max(last, at);
      });
      if (last > first) spanNs += last - first;
    }
    return {
      acquired: waitsNs.length,
      byCommand,
      missing,
      errors,
      firstError,
      early,
      waitsNs,
      spanNs,
      commands,
      cpuUs,
      requests,
      heapBytes,
      channels,
    };
  } finally {
    await disconnect(waiter, `${label}-waiter`);
    await disconnect(holder, `${label}-holder`);
  }
}

async function keysPoint(context: RunContext, count: number): Promise<Outcome> {
  const label = keyPoint(count);
  const before = await unhandledTotal(context.workers);
  const timed = await keysPass(context, count, label, undefined);
  const proxy = await CountingProxy.start(context.redis.url);
  let counted: KeysPass;
  try {
    counted = await keysPass(context, count, `${label}-rt`, proxy);
  } finally {
    await proxy.stop();
  }
  const unhandled = (await unhandledTotal(context.workers)) - before;
  const wait = latency(timed.waitsNs);
  const per = (total: number, n: number, digits: number): number => (n === 0 ? -1 : round(total / n, digits));
  const metrics: Metrics = {
    acqPerSec: timed.spanNs === 0 ? -1 : round(timed.acquired / (timed.spanNs / 1e9), 1),
    waitP50Ms: round(wait.p50Ms, 3),
    waitP99Ms: round(wait.p99Ms, 3),
    roundTripsPerAcq: per(counted.requests, counted.acquired, 3),
    cmdsPerAcq: per(timed.commands, timed.acquired, 3),
    redisCpuUsPerAcq: per(timed.cpuUs, timed.acquired, 2),
    clientHeapKB: round(timed.heapBytes / 1024, 1),
    clientHeapBytesPerKey: round(timed.heapBytes / count, 0),
    subscriptions: timed.channels,
    acquisitions: timed.acquired,
  };
  const notes: string[] = [
    `round trips by command, per hand-off: ${breakdown(counted.byCommand, Math.max(1, counted.acquired))}`,
  ];
  const slow = timed.waitsNs.filter((ns) => ns > 1e9).length;
  if (slow > 0)
    notes.push(
      `${slow} hand-off(s) waited over 1 s, the longest ${round(wait.maxMs, 1)} ms (the library's default call timeout is 5 s)`,
    );
  if (count < 100)
    notes.push(
      `${count} key(s): the heap after GC moves by more than ${count === 1 ? 'one' : 'these'} hold and wait take (clientHeapBytesPerKey is noise here); hand-offs repeated in ${Math.round(timed.acquired / count)} rounds for percentiles, each round's release alone, so the server's system calls and wake-ups per request weigh on its CPU per hand-off as they do not when 200 releases arrive together`,
    );
  const missing = timed.missing + counted.missing;
  const early = timed.early + counted.early;
  if (early > 0)
    return { status: 'failed', reason: `${early} waiter(s) acquired before the holder released`, metrics };
  const errors = timed.errors + counted.errors;
  if (errors > 0) {
    const first = timed.firstError === '' ? counted.firstError : timed.firstError;
    return { status: 'failed', reason: `${errors} wait(s) failed, the first: ${first}`, metrics };
  }
  if (missing > 0)
    return {
      status: 'failed',
      reason: `${missing} waiter(s) never acquired within the time allowed`,
      metrics,
    };
  if (unhandled > 0) return { status: 'failed', reason: `${unhandled} unhandled rejection(s)`, metrics };
  return { status: 'ok', metrics, notes };
}

/** A point that throws fails alone; the other points keep their numbers. */
async function isolated(point: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await point();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { status: 'failed', reason: `error: ${message.split('\n')[0] ?? message}` };
  }
}

// ---- the scenario -------------------------------------------------------------------------------

export const scaling: Scenario = {
  names: [...CONTENDER_POINTS.map(contenderPoint), ...KEY_POINTS.map(keyPoint)],
  skip: (adapter) =>
    adapter.caps.wait === 'none'
      ? 'floor: cannot wait for a held lock'
      : !SCALING_CONTENDERS.includes(adapter.name)
        ? `the curves are drawn for ${SCALING_CONTENDERS.join(' and ')} only, to bound the run`
        : undefined,
  async run(context) {
    const outcomes: Record<string, Outcome> = {};
    const latchkeyOnly = context.quick && context.adapter.name !== 'latchkey';
    const polling = context.adapter.caps.wait === 'polling';
    for (const n of CONTENDER_POINTS) {
      const name = contenderPoint(n);
      if (latchkeyOnly) outcomes[name] = { status: 'skipped', reason: 'quick run: latchkey only' };
      else if (context.quick && !QUICK_CONTENDER_POINTS.includes(n))
        outcomes[name] = { status: 'skipped', reason: 'quick run: full run only' };
      else {
        context.log(`${name}`);
        outcomes[name] = await isolated(() => contendersPoint(context, n));
      }
    }
    for (const n of KEY_POINTS) {
      const name = keyPoint(n);
      if (latchkeyOnly) outcomes[name] = { status: 'skipped', reason: 'quick run: latchkey only' };
      else if (context.quick && !QUICK_KEY_POINTS.includes(n))
        outcomes[name] = { status: 'skipped', reason: 'quick run: full run only' };
      else if (polling && n > 10_000)
        outcomes[name] = {
          status: 'skipped',
          reason: `${n.toLocaleString('en-US')} waiters polling every few ms would be millions of requests a second on one server`,
        };
      else {
        context.log(`${name}`);
        const started = Date.now();
        outcomes[name] = await isolated(() => keysPoint(context, n));
        context.log(`${name}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
      }
    }
    return outcomes;
  },
};
