// Scenario "uncontended": acquire + release, one after another, on one key ("uncontended") and
// on a fresh key each cycle ("uncontended-distinct"). Every contender is timed in the same
// process at the same time: each keeps its own session (its own clients), but the cycles run in
// short blocks handed round-robin from contender to contender, the first contender rotating each
// round, so machine noise and warm-up order fall on all of them alike. Round trips are counted
// afterwards in a separate pass through the counting proxy, one contender after another.
import { CONTENDER_NAMES, type ContenderName, type Session } from '../contenders/types.js';
import { nowNs } from '../ipc.js';
import { CountingProxy, totalOf } from '../proxy.js';
import { costSince, serverCost } from '../redis.js';
import { latency, round } from '../stats.js';
import { closeSession, openSession, session, unhandledCount } from '../worker-state.js';
import {
  num,
  str,
  type InterleavedContext,
  type InterleavedScenario,
  type OpArgs,
  type Outcome,
  type WorkerOps,
} from './common.js';

/** What one contender's timing gave, as the worker returns it. */
interface Timing {
  readonly durations: number[];
  /** Summed wall time of this contender's measured blocks. */
  readonly elapsedNs: number;
  /** Unhandled rejections that surfaced during this contender's steps. */
  readonly unhandled: number;
  readonly error?: string;
}

interface ContenderState {
  readonly name: ContenderName;
  readonly sessionId: string;
  readonly prefix: string;
  durations: number[];
  elapsedNs: number;
  unhandled: number;
  error: string | undefined;
  /** Next key index, for the distinct variant. */
  next: number;
}

/** A step that takes longer than this marks the contender failed; the others carry on. */
const STEP_TIMEOUT_MS = 30_000;

function message(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
}

function names(args: OpArgs): ContenderName[] {
  const value = args['contenders'];
  if (!Array.isArray(value)) throw new Error('op argument contenders must be an array');
  return value.map((name) => {
    if (!(CONTENDER_NAMES as readonly unknown[]).includes(name))
      throw new Error(`unknown contender ${String(name)}`);
    return name as ContenderName;
  });
}

function prefixes(args: OpArgs): Readonly<Record<string, string>> {
  const value = args['prefixes'];
  if (typeof value !== 'object' || value === null) throw new Error('op argument prefixes must be an object');
  return value as Record<string, string>;
}

/**
 * Runs `body` for one contender unless it already failed. A throw, or no end within the step
 * timeout, fails this contender only; rejections left unhandled meanwhile count against it
 * (they surface once the microtask queue drains, hence the setImmediate before reading).
 */
async function step(state: ContenderState, body: () => Promise<void>): Promise<void> {
  if (state.error !== undefined) return;
  const before = unhandledCount();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      body(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`a step took longer than ${STEP_TIMEOUT_MS / 1000} s`)),
          STEP_TIMEOUT_MS,
        );
      }),
    ]);
  } catch (error) {
    state.error = message(error);
  } finally {
    clearTimeout(timer);
  }
  await new Promise((resolve) => setImmediate(resolve));
  state.unhandled += unhandledCount() - before;
}

/** `count` acquire+release cycles; pushes each cycle's duration (ns) when `out` is given. */
async function cycles(
  locks: Session,
  keyOf: () => string,
  count: number,
  out: number[] | undefined,
): Promise<void> {
  for (let i = 0; i < count; i += 1) {
    const key = keyOf();
    const start = nowNs();
    const held = await locks.acquire(key);
    await held.release();
    out?.push(nowNs() - start);
  }
}

export const uncontendedOps: WorkerOps = {
  /** Runs `cycles` acquire+release cycles on one session (the round-trip pass). */
  async 'uncontended.cycles'(args) {
    const locks = session(str(args, 'session'));
    const prefix = str(args, 'prefix');
    const distinct = args['distinct'] === true;
    let index = 0;
    await cycles(locks, () => (distinct ? `${prefix}:${index++}` : prefix), num(args, 'cycles'), undefined);
    return null;
  },

  /**
   * Opens a session per contender, then runs `warmupRounds` + `rounds` rounds; in each round
   * every contender runs one block of `blockCycles` cycles, starting one contender further on
   * than the round before. Only the last `rounds` rounds are recorded.
   */
  async 'uncontended.interleaved'(args) {
    const url = str(args, 'url');
    const variant = str(args, 'variant');
    const distinct = variant === 'distinct';
    const warmupRounds = num(args, 'warmupRounds');
    const rounds = num(args, 'rounds');
    const blockCycles = num(args, 'blockCycles');
    const keyPrefixes = prefixes(args);
    const states: ContenderState[] = names(args).map((name) => ({
      name,
      sessionId: `unc-${variant}-${name}`,
      prefix: `${keyPrefixes[name] ?? `bench:${name}`}:unc:${variant}`,
      durations: [],
      elapsedNs: 0,
      unhandled: 0,
      error: undefined,
      next: 0,
    }));
    for (const state of states) {
      await step(state, () =>
        openSession(state.sessionId, state.name, url, `bench-unc-${state.name}`, undefined),
      );
    }
    for (let r = 0; r < warmupRounds + rounds; r += 1) {
      const recording = r >= warmupRounds;
      const tag = recording ? 't' : 'w';
      for (let k = 0; k < states.length; k += 1) {
        const state = states[(r + k) % states.length];
        if (state === undefined) continue;
        await step(state, async () => {
          const keyOf = (): string => (distinct ? `${state.prefix}:${tag}:${state.next++}` : state.prefix);
          const start = nowNs();
          await cycles(session(state.sessionId), keyOf, blockCycles, recording ? state.durations : undefined);
          if (recording) state.elapsedNs += nowNs() - start;
        });
      }
    }
    for (const state of states) {
      // Closing is part of the contender: a rejection it leaves behind counts against it.
      const failed = state.error;
      state.error = undefined;
      await step(state, () => closeSession(state.sessionId));
      state.error = failed ?? state.error;
    }
    return Object.fromEntries(
      states.map((state): [string, Timing] => [
        state.name,
        {
          durations: state.durations,
          elapsedNs: state.elapsedNs,
          unhandled: state.unhandled,
          ...(state.error === undefined ? {} : { error: state.error }),
        },
      ]),
    );
  },
};

type Variant = 'single' | 'distinct';
const VARIANTS: Readonly<Record<Variant, string>> = {
  single: 'uncontended',
  distinct: 'uncontended-distinct',
};

interface Sizes {
  readonly warmupRounds: number;
  readonly rounds: number;
  readonly blockCycles: number;
  readonly countedCycles: number;
}

function sizes(quick: boolean): Sizes {
  // 600 (quick) or 5,000 recorded cycles per contender, in blocks of 100.
  return quick
    ? { warmupRounds: 2, rounds: 6, blockCycles: 100, countedCycles: 100 }
    : { warmupRounds: 10, rounds: 50, blockCycles: 100, countedCycles: 500 };
}

/**
 * Requests per cycle for each contender, with the Redis commands (a script's own calls
 * included) and Redis CPU time they cost, or the reason its pass failed.
 */
type RoundTrips = Record<
  string,
  | { readonly perCycle: number; readonly commands: number; readonly cpuUs: number }
  | { readonly error: string }
>;

/**
 * One contender after another, each with a fresh session through one proxy that stays up for
 * the whole pass (so no closed port is left for a lingering connection to retry against).
 */
async function roundTrips(
  context: InterleavedContext,
  variant: Variant,
  only: readonly string[],
): Promise<RoundTrips> {
  const { worker } = context;
  const { countedCycles } = sizes(context.quick);
  const distinct = variant === 'distinct';
  const result: RoundTrips = {};
  const proxy = await CountingProxy.start(context.redis.url);
  try {
    for (const name of only) {
      const sessionId = `unc-rt-${variant}-${name}`;
      const prefix = `${context.keyPrefix(name)}:unc:${variant}`;
      try {
        const before = await worker.call<number>({ op: 'unhandled' });
        await worker.call({
          op: 'connect',
          session: sessionId,
          contender: name,
          url: proxy.url,
          name: `bench-unc-rt-${name}`,
        });
        await worker.call({
          op: 'uncontended.cycles',
          session: sessionId,
          prefix: `${prefix}:rw`,
          distinct,
          cycles: 50,
        });
        proxy.take();
        const costBefore = await serverCost(context.redis.admin);
        await worker.call({
          op: 'uncontended.cycles',
          session: sessionId,
          prefix: `${prefix}:r`,
          distinct,
          cycles: countedCycles,
        });
        const cost = costSince(costBefore, await serverCost(context.redis.admin));
        const perCycle = totalOf(proxy.take()) / countedCycles;
        await worker.call({ op: 'disconnect', session: sessionId });
        const unhandled = (await worker.call<number>({ op: 'unhandled' })) - before;
        result[name] =
          unhandled > 0
            ? { error: `${unhandled} unhandled rejection(s) in the round-trip pass` }
            : {
                perCycle,
                commands: cost.commands / countedCycles,
                cpuUs: cost.cpuUs / countedCycles,
              };
      } catch (error) {
        result[name] = { error: `round-trip pass: ${message(error)}` };
        await worker.call({ op: 'disconnect', session: sessionId }).catch(() => undefined);
      }
    }
  } finally {
    await proxy.stop();
  }
  return result;
}

function outcome(timing: Timing | undefined, trips: RoundTrips[string] | undefined): Outcome {
  if (timing === undefined) return { status: 'failed', reason: 'no timing came back for this contender' };
  if (timing.error !== undefined) return { status: 'failed', reason: `error: ${timing.error}` };
  const summary = latency(timing.durations);
  const metrics: Record<string, number> = {
    p50Ms: round(summary.p50Ms, 4),
    p99Ms: round(summary.p99Ms, 4),
    opsPerSec: round(timing.durations.length / (timing.elapsedNs / 1e9), 1),
    roundTripsPerCycle: trips !== undefined && 'perCycle' in trips ? round(trips.perCycle, 3) : -1,
    cmdsPerCycle: trips !== undefined && 'perCycle' in trips ? round(trips.commands, 2) : -1,
    redisCpuUsPerCycle: trips !== undefined && 'perCycle' in trips ? round(trips.cpuUs, 1) : -1,
    cycles: timing.durations.length,
  };
  if (timing.unhandled > 0) {
    return { status: 'failed', reason: `${timing.unhandled} unhandled rejection(s)`, metrics };
  }
  if (trips === undefined) return { status: 'failed', reason: 'no round-trip count', metrics };
  if ('error' in trips) return { status: 'failed', reason: trips.error, metrics };
  return { status: 'ok', metrics };
}

export const uncontended: InterleavedScenario = {
  names: Object.values(VARIANTS),
  async run(context) {
    const { worker } = context;
    const { warmupRounds, rounds, blockCycles } = sizes(context.quick);
    const contenders = context.adapters.map((adapter) => adapter.name);
    const keyPrefixes = Object.fromEntries(contenders.map((name) => [name, context.keyPrefix(name)]));
    const variants = (Object.keys(VARIANTS) as Variant[]).filter((variant) =>
      context.wanted(VARIANTS[variant]),
    );
    // Every timing first, then the proxied passes, so nothing a proxied session leaves behind
    // runs during a timing.
    const timings: Partial<Record<Variant, Record<string, Timing>>> = {};
    for (const variant of variants) {
      const started = Date.now();
      timings[variant] = await worker.call<Record<string, Timing>>({
        op: 'uncontended.interleaved',
        url: context.redis.url,
        variant,
        contenders,
        prefixes: keyPrefixes,
        warmupRounds,
        rounds,
        blockCycles,
      });
      context.log(`${VARIANTS[variant]}: timed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    const outcomes: Record<string, Record<string, Outcome>> = {};
    for (const variant of variants) {
      const timing = timings[variant] ?? {};
      const measured = contenders.filter((name) => timing[name]?.error === undefined);
      const trips = await roundTrips(context, variant, measured);
      outcomes[VARIANTS[variant]] = Object.fromEntries(
        contenders.map((name) => [name, outcome(timing[name], trips[name])]),
      );
    }
    return outcomes;
  },
};
