// Scenario "handoff-paired": the hand-off of latchkey and of its floor (`floor-pubsub`), timed
// by turns in the same two processes over the same stretch of time. The "handoff" scenario
// measures each contender in its own worker pool, minutes apart; on a shared 2-core machine its
// p50s drift between pools by more than the 1.2x the target allows (a floor measured slower
// than latchkey in one run, 1.5x faster in the next). Here blocks of hand-offs alternate
// between the two, the first moving one place each round, so drift falls on both alike. A
// full run does it in three pairs of fresh processes, one after the other, and pools their
// hand-offs: the same build's ratio differs from one pair of processes to the next by more
// than the target's margin (1.40x, 1.25x and 1.31x in three single pairs run one after the
// other), so one pair says too little.
// The hand-off itself is the one "handoff" times: the holder releases while the waiter, in the
// other process, is blocked in acquire; from the stamp before release() to the stamp after the
// waiter's acquire resolved. `floor-rlock` (latchkey's own scripts sent by a bare client), when
// in the run, takes its turns too: it splits the gap between the two into what latchkey's
// protocol costs in Redis and what its client adds.
import type { ContenderName } from '../contenders/types.js';
import type { WorkerHandle } from '../ipc.js';
import type { Admin } from '../redis.js';
import { overlaps, latency, round, type Interval } from '../stats.js';
import { type InterleavedContext, type InterleavedScenario, type Outcome } from './common.js';
import { oneHandoff, type HandoffHooks } from './handoff.js';

/** The pair this scenario times: latchkey's lock and the floor its hand-off target names. */
const PAIR: readonly ContenderName[] = ['latchkey', 'floor-pubsub'];
/** Timed beside the pair when in the run. */
const ALSO: readonly ContenderName[] = ['floor-rlock'];

/**
 * Pairs of processes, rounds per pair and block size: 3 pairs of 9 rounds (full, 540 hand-offs
 * per contender) or one of 10 (quick, 100), each pair after a warm-up: `warmupRounds` rounds
 * untimed, then `jitHandoffs` untimed hand-offs per contender. The first pair also times
 * `coldRounds` rounds between the two, before the JIT warm-up (see {@link JIT_SETTLE_MS}).
 */
function sizes(quick: boolean): {
  pairs: number;
  jitHandoffs: number;
  coldRounds: number;
  warmupRounds: number;
  rounds: number;
  block: number;
  settleMs: number;
} {
  return quick
    ? { pairs: 1, jitHandoffs: 600, coldRounds: 2, warmupRounds: 1, rounds: 10, block: 10, settleMs: 15 }
    : { pairs: 3, jitHandoffs: 2_000, coldRounds: 3, warmupRounds: 2, rounds: 9, block: 20, settleMs: 25 };
}

/**
 * The warm-up's hand-offs wait this long, rather than `settleMs`, before the release: most find
 * the waiter blocked already, and the others run the same code by another path (the lock free
 * when asked for). They bring both contenders' code in both processes to what V8 compiles for a
 * process that has been handing locks over for a while: a fresh process runs each function in
 * V8's interpreter until it has been called often enough, so the first few hundred hand-offs
 * measure a process's warm-up rather than a service's steady state. (In the first full run
 * with it, the warm-up made both about a quarter faster and left their ratio as it was.) The
 * hand-off before it is measured too: the first pair's `coldRounds`, timed before the JIT
 * warm-up, are reported as `coldP50Ms`.
 */
const JIT_SETTLE_MS = 1;

/** Hand-offs per contender in the pass that reads Redis's own time off SLOWLOG (last pair only). */
const REDIS_PASS = { quick: 20, full: 60 } as const;

/**
 * Redis's own time on the path of one hand-off, from its SLOWLOG with every command logged:
 * what the commands sent between the holder's release and the waiter's acquisition took to
 * execute on the server (a script with the calls it made; the harness's SLOWLOG calls left
 * out), in µs. Logging every command costs the server time of its own, so these hand-offs are
 * not timed.
 */
function redisTimeProbe(admin: Admin): HandoffHooks & { readonly times: number[] } {
  const times: number[] = [];
  return {
    times,
    async beforeRelease() {
      await admin.sendCommand(['SLOWLOG', 'RESET']);
    },
    async acquired() {
      const entries = await admin.sendCommand<unknown[]>(['SLOWLOG', 'GET', '1000']);
      let total = 0;
      for (const entry of entries) {
        if (!Array.isArray(entry)) continue;
        const [, , duration, args, client] = entry as [unknown, unknown, unknown, unknown, unknown];
        const command = Array.isArray(args) ? String(args[0]).toLowerCase() : '';
        // A script's own calls are logged apart, from no client ("?:0"), and within its time.
        if (client === '?:0' || command === 'slowlog') continue;
        total += Number(duration);
      }
      times.push(total);
    },
  };
}

/** Sets a config parameter for the time `during` runs, then puts back what it was. */
async function withConfig<T>(
  admin: Admin,
  settings: Record<string, string>,
  during: () => Promise<T>,
): Promise<T> {
  const saved: Record<string, string> = {};
  for (const name of Object.keys(settings)) {
    const reply = await admin.sendCommand<unknown[]>(['CONFIG', 'GET', name]);
    saved[name] = String(reply[1]);
  }
  for (const [name, value] of Object.entries(settings))
    await admin.sendCommand(['CONFIG', 'SET', name, value]);
  try {
    return await during();
  } finally {
    for (const [name, value] of Object.entries(saved))
      await admin.sendCommand(['CONFIG', 'SET', name, value]);
  }
}

interface PairState {
  readonly name: ContenderName;
  readonly key: string;
  readonly handoffs: number[];
  /** The first pair's hand-offs timed before its JIT warm-up. */
  readonly cold: number[];
  /** The hand-offs of each pair of processes, in order. */
  readonly byPair: number[][];
  readonly intervals: Interval[];
  /** Redis's own time per hand-off from the SLOWLOG pass, µs. */
  redisUs: readonly number[];
  error: string | undefined;
}

function message(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
}

export const handoffPaired: InterleavedScenario = {
  names: ['handoff-paired'],
  processes: 2,
  async run(context: InterleavedContext) {
    const { pairs, jitHandoffs, coldRounds, warmupRounds, rounds, block, settleMs } = sizes(context.quick);
    const outcomes: Record<string, Outcome> = {};
    const states: PairState[] = [];
    for (const adapter of context.adapters) {
      if (!PAIR.includes(adapter.name) && !ALSO.includes(adapter.name)) {
        outcomes[adapter.name] = {
          status: 'skipped',
          reason:
            'times latchkey, floor-pubsub and floor-rlock only; every contender has the handoff scenario',
        };
        continue;
      }
      states.push({
        name: adapter.name,
        key: `${context.keyPrefix(adapter.name)}:handoff-paired`,
        handoffs: [],
        cold: [],
        byPair: [],
        intervals: [],
        redisUs: [],
        error: undefined,
      });
    }
    if (PAIR.some((name) => !states.some((state) => state.name === name))) {
      for (const state of states)
        outcomes[state.name] = { status: 'skipped', reason: 'needs both latchkey and floor-pubsub' };
      return { 'handoff-paired': outcomes };
    }
    const sessionOf = (state: PairState, role: 'holder' | 'waiter'): string => `hp-${role}-${state.name}`;
    const used: WorkerHandle[] = [];
    const unhandled = async (): Promise<number> => {
      let total = 0;
      for (const worker of used) total += await worker.call<number>({ op: 'unhandled' });
      return total;
    };
    /** One pair of processes: connects every contender's sessions, runs the rounds, disconnects. */
    const runPair = async (holder: WorkerHandle, waiter: WorkerHandle, pair: number): Promise<void> => {
      for (const state of states) state.byPair.push([]);
      const handOff = (
        state: PairState,
        around?: HandoffHooks,
        settle = settleMs,
      ): ReturnType<typeof oneHandoff> =>
        oneHandoff(
          holder,
          waiter,
          { holder: sessionOf(state, 'holder'), waiter: sessionOf(state, 'waiter') },
          state.key,
          settle,
          around,
        );
      /**
       * `count` rounds of a block of hand-offs per contender, the first contender moving one
       * place each round; `record` keeps each timed hand-off (none when undefined).
       */
      const rotate = async (
        count: number,
        perBlock: number,
        settle: number,
        record?: (state: PairState, handoffNs: number) => void,
      ): Promise<void> => {
        for (let r = 0; r < count; r += 1) {
          for (let k = 0; k < states.length; k += 1) {
            const state = states[(r + pair + k) % states.length];
            if (state === undefined || state.error !== undefined) continue;
            try {
              for (let i = 0; i < perBlock; i += 1) {
                const one = await handOff(state, undefined, settle);
                state.intervals.push(...one.intervals);
                record?.(state, one.handoffNs);
              }
            } catch (error) {
              state.error = message(error);
            }
          }
        }
      };
      try {
        for (const state of states) {
          for (const [worker, role] of [
            [holder, 'holder'],
            [waiter, 'waiter'],
          ] as const) {
            await worker.call({
              op: 'connect',
              session: sessionOf(state, role),
              contender: state.name,
              url: context.redis.url,
              name: `bench-${sessionOf(state, role)}`,
            });
          }
        }
        await rotate(warmupRounds, block, settleMs);
        if (pair === 0) await rotate(coldRounds, block, settleMs, (state, ns) => void state.cold.push(ns));
        // In blocks of 100, so neither contender's code warms up wholly before the other's.
        await rotate(Math.ceil(jitHandoffs / 100), Math.min(100, jitHandoffs), JIT_SETTLE_MS);
        await rotate(rounds, block, settleMs, (state, ns) => {
          state.handoffs.push(ns);
          state.byPair[pair]?.push(ns);
        });
        if (pair === pairs - 1) {
          for (const state of states) {
            if (state.error !== undefined) continue;
            const probe = redisTimeProbe(context.redis.admin);
            try {
              await withConfig(
                context.redis.admin,
                { 'slowlog-log-slower-than': '0', 'slowlog-max-len': '1000' },
                async () => {
                  for (let i = 0; i < (context.quick ? REDIS_PASS.quick : REDIS_PASS.full); i += 1) {
                    const one = await handOff(state, probe);
                    state.intervals.push(...one.intervals);
                  }
                },
              );
              state.redisUs = probe.times;
            } catch (error) {
              state.error = `SLOWLOG pass: ${message(error)}`;
            }
          }
        }
      } finally {
        for (const state of states) {
          await holder.call({ op: 'disconnect', session: sessionOf(state, 'holder') }).catch(() => undefined);
          await waiter.call({ op: 'disconnect', session: sessionOf(state, 'waiter') }).catch(() => undefined);
        }
      }
    };

    let before = 0;
    for (let pair = 0; pair < pairs; pair += 1) {
      const [holder, waiter] = pair === 0 ? context.workers : await context.freshWorkers();
      if (holder === undefined || waiter === undefined) throw new Error('need two workers');
      before +=
        (await holder.call<number>({ op: 'unhandled' })) + (await waiter.call<number>({ op: 'unhandled' }));
      used.push(holder, waiter);
      await runPair(holder, waiter, pair);
    }

    const leftUnhandled = (await unhandled()) - before;
    for (const state of states) {
      const summary = latency(state.handoffs);
      const metrics: Record<string, number> = {
        p50Ms: round(summary.p50Ms, 4),
        p90Ms: round(summary.p90Ms, 4),
        p99Ms: round(summary.p99Ms, 4),
        maxMs: round(summary.maxMs, 3),
        handoffs: state.handoffs.length,
        pairs: state.byPair.length,
      };
      if (state.cold.length > 0) metrics['coldP50Ms'] = round(latency(state.cold).p50Ms, 4);
      // Each pair's own p50, so the report can show how far they spread.
      state.byPair.forEach((handoffs, pair) => {
        if (handoffs.length > 0) metrics[`pair${pair + 1}P50Ms`] = round(latency(handoffs).p50Ms, 4);
      });
      if (state.redisUs.length > 0) {
        const sorted = [...state.redisUs].sort((a, b) => a - b);
        metrics['redisUsP50'] = sorted[Math.floor(sorted.length / 2)] ?? 0;
      }
      const overlapping = overlaps(state.intervals);
      outcomes[state.name] =
        state.error !== undefined
          ? { status: 'failed', reason: `error: ${state.error}`, metrics }
          : overlapping > 0
            ? {
                status: 'failed',
                reason: `mutual exclusion violated: ${overlapping} overlapping holds`,
                metrics,
              }
            : leftUnhandled > 0
              ? {
                  status: 'failed',
                  reason: `${leftUnhandled} unhandled rejection(s) in the pair's run`,
                  metrics,
                }
              : { status: 'ok', metrics };
    }
    return { 'handoff-paired': outcomes };
  },
};
