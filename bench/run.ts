// Entry of `npm run bench`: starts (or uses) Redis, measures the uncontended scenarios for every
// contender together in one worker process (interleaved), then runs every other scenario for
// each contender in its own pool of worker processes, and writes bench/results/latest.{json,md,svg}.
//   --quick                  smaller counts and shorter runs (under 3 minutes)
//   --out <dir>              write the results there instead of bench/results
//   --only <contender,...>   run only these contenders
//   --scenario <name,...>    run only these scenarios (e.g. handoff, contended, contended-8)
// With --only or --scenario, results of an earlier run of the same kind (quick or full) in the
// output directory are kept and only the rerun entries replaced.
// A full run of everything then runs the topology benchmarks (bench/cluster.ts, bench/redlock.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, arch, release, type } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADAPTERS } from './contenders/index.js';
import { CONTENDER_NAMES, type Adapter, type ContenderName } from './contenders/types.js';
import { spawnWorkers, type WorkerHandle } from './ipc.js';
import { flushIfOwned, info, startBenchRedis } from './redis.js';
import { writeReport } from './report/write.js';
import { baselineOf, emptyResults, record, type Baseline, type Env, type Results } from './results-model.js';
import { contended } from './scenarios/contended.js';
import { handoff } from './scenarios/handoff.js';
import { handoffPaired } from './scenarios/handoff-paired.js';
import { manyKeys } from './scenarios/many-keys.js';
import { reentry } from './scenarios/reentry.js';
import { scaling } from './scenarios/scaling.js';
import { uncontended } from './scenarios/uncontended.js';
import type { InterleavedScenario, Outcome, Scenario } from './scenarios/common.js';

/** Measured with every contender in one process, before the per-contender pools. */
const INTERLEAVED: readonly InterleavedScenario[] = [uncontended, handoffPaired];
const SCENARIOS: readonly Scenario[] = [reentry, handoff, contended, manyKeys, scaling];
const GROUPS: Readonly<Record<string, { readonly names: readonly string[] }>> = {
  uncontended,
  reentry,
  // The hand-off's two passes: every contender on its own, and latchkey paired with its floor.
  handoff: { names: [...handoff.names, ...handoffPaired.names] },
  'handoff-paired': handoffPaired,
  contended,
  manyKeys,
  scaling,
};
const PROCESSES = 4;
/**
 * Benchmarks of the other topologies (a local cluster; three masters for Redlock), each its own
 * script writing bench/results/<name>.md; `npm run bench:cluster` and `npm run bench:redlock` run
 * one alone.
 */
const TOPOLOGY_BENCHES = ['cluster.ts', 'redlock.ts'] as const;
/**
 * Peers the benchmark would compare but cannot install, each with the reason; they go into every
 * run's notes so a reader does not take their absence for an oversight.
 */
const NOT_COMPARED: readonly string[] = [
  'redlock-universal is not compared: every published version (0.6.5 to 0.8.5) declares engines node >=22, while latchkey supports Node 20 and this benchmark runs on it.',
];
/** What every run measures latchkey from (bench/latchkey-package.ts). */
const LATCHKEY_BUILD_NOTE =
  'latchkey runs from its built package (dist/, the bundles `npm run build` writes and users install), as every peer runs from its published build.';
const benchDir = dirname(fileURLToPath(import.meta.url));
const rootDir = resolve(benchDir, '..');

interface Cli {
  quick: boolean;
  out: string;
  only: ContenderName[];
  scenarios: Set<string> | undefined;
}

/** The library a contender of latchkey's or redis-semaphore's kinds comes from; undefined otherwise. */
function familyOf(name: string): string | undefined {
  if (name.startsWith('latchkey-')) return 'latchkey';
  if (name.startsWith('rs-')) return 'redis-semaphore';
  return undefined;
}

function parseCli(argv: readonly string[]): Cli {
  const cli: Cli = {
    quick: false,
    out: join(benchDir, 'results'),
    only: [...CONTENDER_NAMES],
    scenarios: undefined,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const value = (): string => {
      const next = argv[i + 1];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      i += 1;
      return next;
    };
    if (arg === '--quick') cli.quick = true;
    else if (arg === '--out') cli.out = resolve(value());
    else if (arg === '--only') {
      const names = value().split(',');
      for (const name of names) {
        if (!(CONTENDER_NAMES as readonly string[]).includes(name)) {
          throw new Error(`unknown contender ${name}; one of ${CONTENDER_NAMES.join(', ')}`);
        }
      }
      cli.only = names as ContenderName[];
    } else if (arg === '--scenario') {
      const known = new Set([...Object.keys(GROUPS), ...Object.values(GROUPS).flatMap((s) => s.names)]);
      const names = value().split(',');
      for (const name of names)
        if (!known.has(name)) throw new Error(`unknown scenario ${name}; one of ${[...known].join(', ')}`);
      cli.scenarios = new Set(names.flatMap((name) => GROUPS[name]?.names ?? [name]));
    } else throw new Error(`unknown argument ${String(arg)}`);
  }
  return cli;
}

/** The installed version of a package the benchmark measures, from this workspace or the root. */
function version(pkg: string): string {
  for (const dir of [benchDir, rootDir]) {
    try {
      const json = JSON.parse(readFileSync(join(dir, 'node_modules', pkg, 'package.json'), 'utf8')) as {
        version?: string;
      };
      return json.version ?? 'unknown';
    } catch {
      // Not installed there: npm puts a workspace's dependencies in the root unless they clash.
    }
  }
  return 'not installed';
}

async function environment(redisVersion: string, quick: boolean, spawned: boolean): Promise<Env> {
  const own = JSON.parse(readFileSync(join(rootDir, 'package.json'), 'utf8')) as { version: string };
  return Promise.resolve({
    cpuModel: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    node: process.version,
    redis: redisVersion,
    os: `${type()} ${release()} ${arch()}`,
    date: new Date().toISOString(),
    quick,
    loadAverage: loadavg().map((load) => Math.round(load * 100) / 100),
    peerVersions: {
      latchkey: own.version,
      redis: version('redis'),
      ioredis: version('ioredis'),
      iovalkey: version('iovalkey'),
      '@valkey/valkey-glide': version('@valkey/valkey-glide'),
      redlock: version('redlock'),
      '@sesamecare-oss/redlock': version('@sesamecare-oss/redlock'),
      'redis-semaphore': version('redis-semaphore'),
      'node-redisson': version('node-redisson'),
      'simple-redis-mutex': version('simple-redis-mutex'),
    },
    redisServer: spawned ? 'started by the harness (--save "" --appendonly no, loopback)' : 'REDIS_URL',
    processes: PROCESSES,
    notes: [LATCHKEY_BUILD_NOTE, ...NOT_COMPARED],
  });
}

function previous(out: string, quick: boolean): Results | undefined {
  const file = join(out, 'latest.json');
  if (!existsSync(file)) return undefined;
  try {
    const old = JSON.parse(readFileSync(file, 'utf8')) as Results;
    return old.env.quick === quick ? old : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The baseline of the regression targets: bench/results/latest.json as committed (at HEAD),
 * else as it is on disk, whatever --out says; undefined when there is neither.
 */
function committedBaseline(): Baseline | undefined {
  const path = 'bench/results/latest.json';
  const parse = (text: string, source: string): Baseline | undefined => {
    try {
      return baselineOf(JSON.parse(text) as Results, source);
    } catch {
      return undefined;
    }
  };
  const git = spawnSync('git', ['show', `HEAD:${path}`], { cwd: rootDir, encoding: 'utf8' });
  if (git.status === 0) return parse(git.stdout, `${path} as committed`);
  const file = join(benchDir, 'results', 'latest.json');
  return existsSync(file) ? parse(readFileSync(file, 'utf8'), path) : undefined;
}

/**
 * Why a floor, or a contender on another client, made for other scenarios sits out one with
 * these names, or undefined.
 */
function outside(adapter: Adapter, names: readonly string[]): string | undefined {
  const only = adapter.caps.scenarios;
  if (only === undefined || names.some((name) => only.includes(name))) return undefined;
  return adapter.caps.floor
    ? `floor for the ${only.join(', ')} scenario only`
    : `latchkey on another client: compared in the ${only.join(', ')} scenarios only`;
}

function reason(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  let parentUnhandled = 0;
  process.on('unhandledRejection', (error) => {
    parentUnhandled += 1;
    console.error('unhandled rejection in the harness:', error);
  });
  const redis = await startBenchRedis();
  const stopRedis = async (): Promise<void> => redis.stop();
  process.once('SIGINT', () => {
    void stopRedis().finally(() => process.exit(130));
  });
  try {
    const server = await info(redis.admin, 'server');
    const env = await environment(server.get('redis_version') ?? 'unknown', cli.quick, redis.spawned);
    const partial = cli.only.length < CONTENDER_NAMES.length || cli.scenarios !== undefined;
    const results = (partial ? previous(cli.out, cli.quick) : undefined) ?? emptyResults(env);
    // A partial rerun keeps what the harness noted of the run it merges into (its duration).
    const keptNotes = results.env.notes.filter(
      (note) => (partial || !note.startsWith('harness:')) && !env.notes.includes(note),
    );
    results.env = { ...env, notes: [...env.notes, ...keptNotes] };
    // Read before this run writes its own: the regression targets compare with it.
    const baseline = committedBaseline();
    if (baseline === undefined) delete results.baseline;
    else results.baseline = baseline;
    if (partial)
      results.env.notes.push(
        `harness: partial rerun (${process.argv.slice(2).join(' ')}) merged into earlier results`,
      );
    const clockBase = process.hrtime.bigint();
    const started = Date.now();
    const wanted = (name: string): boolean => cli.scenarios === undefined || cli.scenarios.has(name);
    const show = (scenarioName: string, contender: string, outcome: Outcome): void => {
      record(results, scenarioName, contender, outcome);
      const shown =
        outcome.status === 'ok' ? JSON.stringify(outcome.metrics) : `${outcome.status}: ${outcome.reason}`;
      console.log(`  ${scenarioName} ${contender}: ${shown}`);
    };
    const seconds = (since: number): string => `${((Date.now() - since) / 1000).toFixed(1)} s`;

    for (const scenario of INTERLEAVED.filter((s) => s.names.some(wanted))) {
      console.log(
        `\n== ${scenario.names.join(', ')}: every contender in ${(scenario.processes ?? 1) === 1 ? 'one process' : `the same ${scenario.processes} processes`}, interleaved`,
      );
      const scenarioStart = Date.now();
      const adapters: Adapter[] = [];
      for (const name of cli.only) {
        const skip = outside(ADAPTERS[name], scenario.names);
        if (skip === undefined) adapters.push(ADAPTERS[name]);
        else
          for (const n of scenario.names.filter(wanted)) show(n, name, { status: 'skipped', reason: skip });
      }
      if (adapters.length === 0) continue;
      const fail = (status: 'failed' | 'skipped', why: string): Record<string, Record<string, Outcome>> => {
        const outcome: Outcome = { status, reason: why };
        return Object.fromEntries(
          scenario.names.map((n) => [n, Object.fromEntries(adapters.map((a) => [a.name, outcome]))]),
        );
      };
      const measure = async (): Promise<Record<string, Record<string, Outcome>>> => {
        let workers: WorkerHandle[];
        try {
          workers = await spawnWorkers(scenario.processes ?? 1, clockBase);
        } catch (error) {
          return fail('skipped', `could not start a worker: ${reason(error)}`);
        }
        const [worker] = workers;
        if (worker === undefined) return fail('skipped', 'could not start a worker');
        const spawned: WorkerHandle[] = [];
        try {
          await flushIfOwned(redis);
          return await scenario.run({
            redis,
            quick: cli.quick,
            worker,
            workers,
            freshWorkers: async () => {
              const fresh = await spawnWorkers(scenario.processes ?? 1, clockBase);
              spawned.push(...fresh);
              return fresh;
            },
            adapters,
            keyPrefix: (contender) => `bench:${contender}`,
            wanted,
            log: (message) => console.log(`   ${message}`),
          });
        } catch (error) {
          return fail('failed', `error: ${reason(error)}`);
        } finally {
          await Promise.all([...workers, ...spawned].map((one) => one.stop()));
        }
      };
      const outcomes = await measure();
      for (const [scenarioName, byContender] of Object.entries(outcomes)) {
        if (!wanted(scenarioName)) continue;
        for (const [contender, outcome] of Object.entries(byContender))
          show(scenarioName, contender, outcome);
      }
      console.log(`  (${scenario.names.join(', ')}: ${seconds(scenarioStart)})`);
    }

    const selected = SCENARIOS.filter((s) => s.names.some(wanted));
    /** A worker pool a quick run keeps for the next contender of the same library. */
    let pool: { readonly family: string | undefined; readonly workers: WorkerHandle[] } | undefined;
    for (const name of cli.only) {
      const adapter = ADAPTERS[name];
      if (selected.length === 0) continue;
      console.log(`\n== ${name}`);
      const contenderStart = Date.now();
      const runnable: Scenario[] = [];
      for (const scenario of selected) {
        const skip = outside(adapter, scenario.names) ?? scenario.skip?.(adapter);
        if (skip === undefined) runnable.push(scenario);
        else
          for (const n of scenario.names.filter(wanted)) show(n, name, { status: 'skipped', reason: skip });
      }
      // A pool kept for this contender's library serves it only if it has something to run.
      if (pool !== undefined && (runnable.length === 0 || pool.family !== familyOf(name))) {
        await Promise.all(pool.workers.map((worker) => worker.stop()));
        pool = undefined;
      }
      // Nothing to run (a floor): no pool to start.
      if (runnable.length === 0) continue;
      let workers: WorkerHandle[];
      try {
        const kept = pool;
        pool = undefined;
        workers = kept !== undefined ? kept.workers : await spawnWorkers(PROCESSES, clockBase, true);
      } catch (error) {
        const why = `could not start workers: ${reason(error)}`;
        for (const scenario of runnable)
          for (const n of scenario.names.filter(wanted)) show(n, name, { status: 'skipped', reason: why });
        continue;
      }
      console.log(`  (${PROCESSES} workers up: ${seconds(contenderStart)})`);
      try {
        for (const scenario of runnable) {
          await flushIfOwned(redis);
          const scenarioStart = Date.now();
          let outcomes: Record<string, Outcome>;
          // Only what this scenario leaves unhandled is reported with it.
          await Promise.all(workers.map((worker) => worker.call({ op: 'unhandledReasons' })));
          try {
            outcomes = await scenario.run({
              redis,
              quick: cli.quick,
              workers,
              adapter,
              keyPrefix: `bench:${name}`,
              wanted,
              log: (message) => console.log(`   ${message}`),
            });
          } catch (error) {
            const why = `error: ${reason(error)}`;
            outcomes = Object.fromEntries(
              scenario.names.map((n) => [n, { status: 'failed' as const, reason: why }]),
            );
          }
          const failed = Object.values(outcomes).some((outcome) => outcome.status === 'failed');
          if (failed) {
            // Say what the rejections were, and give the next scenario fresh processes: whatever
            // a failed run left behind (sessions, timers) must not fail the scenarios after it.
            const seen = await Promise.all(
              workers.map((worker) => worker.call<string[]>({ op: 'unhandledReasons' }).catch(() => [])),
            );
            const first = [...new Set(seen.flat())].slice(0, 3);
            if (first.length > 0) {
              outcomes = Object.fromEntries(
                Object.entries(outcomes).map(([scenarioName, outcome]): [string, Outcome] => [
                  scenarioName,
                  outcome.status === 'failed' && outcome.reason.includes('unhandled rejection')
                    ? { ...outcome, reason: `${outcome.reason}; first: ${first.join(' | ')}` }
                    : outcome,
                ]),
              );
            }
          }
          for (const [scenarioName, outcome] of Object.entries(outcomes)) {
            if (wanted(scenarioName)) show(scenarioName, name, outcome);
          }
          console.log(`  (${scenario.names.join(', ')}: ${seconds(scenarioStart)})`);
          if (failed && scenario !== runnable[runnable.length - 1]) {
            await Promise.all(workers.map((worker) => worker.stop()));
            workers = await spawnWorkers(PROCESSES, clockBase, true);
            console.log('  (workers restarted after a failed scenario)');
          }
        }
      } finally {
        // A quick run hands the pool on to the next contender of the same library (latchkey's
        // kinds, redis-semaphore's): their workers would load the same modules.
        const next = cli.only[cli.only.indexOf(name) + 1];
        if (
          cli.quick &&
          next !== undefined &&
          familyOf(next) !== undefined &&
          familyOf(next) === familyOf(name)
        )
          pool = { family: familyOf(name), workers };
        else await Promise.all(workers.map((worker) => worker.stop()));
      }
      console.log(`  (${name}, workers included: ${seconds(contenderStart)})`);
    }
    if (pool !== undefined) await Promise.all(pool.workers.map((worker) => worker.stop()));
    if (parentUnhandled > 0)
      results.env.notes.push(`harness: ${parentUnhandled} unhandled rejection(s) in the parent`);
    results.env.notes.push(
      `harness: ${partial ? 'partial rerun' : 'run'} took ${Math.round((Date.now() - started) / 1000)} s`,
    );
    mkdirSync(cli.out, { recursive: true });
    writeFileSync(join(cli.out, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    console.log(`\nwrote ${join(cli.out, 'latest.json')}`);
    for (const path of writeReport(results, cli.out)) console.log(`wrote ${path}`);
  } finally {
    await stopRedis();
  }
  // The topologies each start servers of their own: after the main run, in a full run of every
  // contender and scenario only.
  if (!cli.quick && cli.scenarios === undefined && cli.only.length === CONTENDER_NAMES.length) {
    for (const script of TOPOLOGY_BENCHES) {
      console.log(`\n== ${script}`);
      const run = spawnSync(process.execPath, ['--import', 'tsx', join(benchDir, script)], {
        cwd: benchDir,
        stdio: 'inherit',
      });
      if (run.status !== 0) console.log(`  ${script} failed (exit ${run.status ?? run.signal})`);
    }
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
