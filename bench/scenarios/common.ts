// Shared shapes of the scenarios: worker op tables, what a scenario run returns to the runner,
// and the run context (server, worker pool, sizes).
import type { Adapter } from '../contenders/types.js';
import type { WorkerHandle } from '../ipc.js';
import type { BenchRedis } from '../redis.js';

export type OpArgs = Readonly<Record<string, unknown>>;
export type WorkerOps = Record<string, (args: OpArgs) => Promise<unknown>>;

export type Metrics = Record<string, number>;

/** One contender's outcome in one scenario (name): numbers, a failure, or a skip. */
export type Outcome =
  | { readonly status: 'ok'; readonly metrics: Metrics; readonly notes?: string[] }
  | { readonly status: 'failed'; readonly reason: string; readonly metrics?: Metrics }
  | { readonly status: 'skipped'; readonly reason: string };

export interface RunContext {
  readonly redis: BenchRedis;
  readonly quick: boolean;
  readonly workers: readonly WorkerHandle[];
  readonly adapter: Adapter;
  /** Prefix for every key of this run, so runs never share a lock. */
  readonly keyPrefix: string;
  /**
   * Whether this scenario name was asked for (--scenario), so a scenario of several names can
   * leave out the costly ones nobody asked for. Undefined: every name.
   */
  readonly wanted?: (scenario: string) => boolean;
  log(message: string): void;
}

export interface Scenario {
  /** Scenario names this file produces (e.g. contended-8, contended-32). */
  readonly names: readonly string[];
  /**
   * Why this contender cannot take part at all (every name skipped), or undefined. Known before
   * any worker starts, so a contender with nothing to run gets no worker pool.
   */
  skip?(adapter: Adapter): string | undefined;
  run(context: RunContext): Promise<Record<string, Outcome>>;
}

/** Context of a scenario that measures every contender together, in one worker process. */
export interface InterleavedContext {
  readonly redis: BenchRedis;
  readonly quick: boolean;
  /** The one worker process every contender runs in (each with its own sessions). */
  readonly worker: WorkerHandle;
  /** Every worker process of the scenario, `worker` first (see {@link InterleavedScenario.processes}). */
  readonly workers: readonly WorkerHandle[];
  /**
   * A new set of as many worker processes as `workers`, for a scenario that measures in more
   * than one; stopped with the others when the scenario ends.
   */
  freshWorkers(): Promise<readonly WorkerHandle[]>;
  readonly adapters: readonly Adapter[];
  /** Prefix for every key of this contender, so contenders never share a lock. */
  keyPrefix(contender: string): string;
  /** Whether this scenario name was asked for (--scenario). */
  wanted(scenario: string): boolean;
  log(message: string): void;
}

export interface InterleavedScenario {
  readonly names: readonly string[];
  /** Worker processes the contenders share; 1 when not given. */
  readonly processes?: number;
  /** scenario name -> contender -> outcome. */
  run(context: InterleavedContext): Promise<Record<string, Record<string, Outcome>>>;
}

export function num(args: OpArgs, field: string): number {
  const value = args[field];
  if (typeof value !== 'number') throw new Error(`op argument ${field} must be a number`);
  return value;
}

export function str(args: OpArgs, field: string): string {
  const value = args[field];
  if (typeof value !== 'string') throw new Error(`op argument ${field} must be a string`);
  return value;
}

/** Unhandled rejections seen by the pool so far (summed over workers). */
export async function unhandledTotal(workers: readonly WorkerHandle[]): Promise<number> {
  const counts = await Promise.all(workers.map((worker) => worker.call<number>({ op: 'unhandled' })));
  return counts.reduce((a, b) => a + b, 0);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Connects session `session` of this contender in `worker` (optionally through a proxy URL). */
export async function connect(
  context: RunContext,
  worker: WorkerHandle,
  session: string,
  options: { url?: string; name?: string; leaseMs?: number; permits?: number } = {},
): Promise<void> {
  await worker.call({
    op: 'connect',
    session,
    contender: context.adapter.name,
    url: options.url ?? context.redis.url,
    name: options.name ?? `bench-${session}`,
    leaseMs: options.leaseMs,
    permits: options.permits,
  });
}

export async function disconnect(worker: WorkerHandle, session: string): Promise<void> {
  await worker.call({ op: 'disconnect', session });
}
