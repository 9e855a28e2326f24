// Entry of `npm run bench:profile`: where latchkey's time and heap go, against the floors it is
// held to, in a few minutes on loopback. It starts its own Redis (or uses REDIS_URL) and:
// - heap: in a fresh worker per pass, holds `--waiters` keys and puts a waiter on each (the
//   many-keys scenario's own ops), with three heap snapshots (before the holds, once they are
//   held, once every key has its waiter) and V8's sampling heap profiler naming the code that
//   allocated what stays; for latchkey's Lock, Semaphore (1 permit) and CountDownLatch, and for
//   floor-pubsub;
// - CPU: latchkey's Lock and floor-rlock (its own scripts sent by a bare client) in the
//   uncontended cycle and in the hand-off (the hand-off scenario's ops, two processes), by
//   turns, under V8's sampling profiler.
// bench/profile/analyse.ts turns the files into figures; report/render-profile.ts writes them
// to bench/results/profile.{json,md}.
//   --waiters <n>   held keys, each with a waiter, per heap pass (default 2,000)
//   --out <dir>     write profile.{json,md} there instead of bench/results
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { arch, cpus, loadavg, release, tmpdir, type } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { flushIfOwned, info, pubsubChannels, startBenchRedis, type BenchRedis } from './redis.js';
import { spawnWorkers, type WorkerHandle } from './ipc.js';
import { ADAPTERS } from './contenders/index.js';
import type { ContenderName } from './contenders/types.js';
import { cpuRoleOf, heapShareOf } from './profile/analyse.js';
import type { Window } from './profile/cpu-profile.js';
import type { CpuLoop, HeapPass, HeapShare, ProfileResults } from './profile/model.js';
import { Origins } from './profile/origins.js';
import { writeProfileReport } from './report/write.js';
import { oneHandoff } from './scenarios/handoff.js';
import { sleep } from './scenarios/common.js';

const benchDir = dirname(fileURLToPath(import.meta.url));
const rootDir = resolve(benchDir, '..');

/** The heap passes: latchkey's three waiting kinds of the heap targets, and the heap's floor. */
const HEAP_PASSES: readonly (Pick<HeapPass, 'label' | 'kind'> & {
  readonly contender: ContenderName;
  /** Keeps a channel subscribed once it has waited on it (floor-pubsub). */
  readonly keeps?: true;
})[] = [
  { label: 'latchkey Lock', contender: 'latchkey', kind: 'lock' },
  { label: 'latchkey Semaphore (1 permit)', contender: 'latchkey', kind: 'semaphore' },
  { label: 'latchkey CountDownLatch', contender: 'latchkey', kind: 'latch' },
  { label: 'floor-pubsub', contender: 'floor-pubsub', kind: 'lock', keeps: true },
];
/** Held keys, each with a waiter, of the round before the snapshots. */
const WARMUP_KEYS = 500;
/** The sampling heap profiler's mean bytes between two samples. */
const SAMPLING_BYTES = 256;
/** The CPU loops' contenders: latchkey and its own protocol sent by a bare client. */
const CPU_CONTENDERS: readonly ContenderName[] = ['latchkey', 'floor-rlock'];
/** The sampling profiler's interval. */
const INTERVAL_US = 100;
/** Uncontended: blocks of cycles by turns, after untimed ones that let V8 compile the code. */
const UNCONTENDED = { warmupRounds: 10, rounds: 40, block: 100 } as const;
/**
 * Hand-off: untimed hand-offs per contender with a short settle (as handoff-paired warms the
 * JIT), then blocks by turns, the waiter given `settleMs` to be blocked before each release.
 */
const HANDOFF = { warmup: 300, warmupSettleMs: 1, rounds: 30, block: 30, settleMs: 20 } as const;

interface Cli {
  waiters: number;
  out: string;
}

function parseCli(argv: readonly string[]): Cli {
  const cli: Cli = { waiters: 2_000, out: join(benchDir, 'results') };
  for (let i = 0; i < argv.length; i += 1) {
    const value = argv[i + 1];
    if (argv[i] === '--waiters' && value !== undefined && Number(value) > 0) cli.waiters = Number(value);
    else if (argv[i] === '--out' && value !== undefined) cli.out = resolve(value);
    else throw new Error(`unknown argument ${String(argv[i])}; usage: [--waiters <n>] [--out <dir>]`);
    i += 1;
  }
  return cli;
}

/** Waits until the server's count of channels stops moving (subscriptions done), at most 30 s. */
async function channelsSettled(redis: BenchRedis): Promise<void> {
  const until = Date.now() + 30_000;
  let last = await pubsubChannels(redis.admin);
  let since = Date.now();
  while (Date.now() < until && Date.now() - since < 800) {
    await sleep(200);
    const now = await pubsubChannels(redis.admin);
    if (now !== last) [last, since] = [now, Date.now()];
  }
}

/**
 * Waits until the server has no more channels than `count` (the subscriptions a round left to
 * linger are gone), at most `ms`.
 */
async function channelsBackTo(redis: BenchRedis, count: number, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until && (await pubsubChannels(redis.admin)) > count) await sleep(200);
}

/**
 * Bytes the server has received from every client so far (INFO stats); the request that reads
 * it adds some 30 bytes of its own.
 */
async function bytesReceived(redis: BenchRedis): Promise<number> {
  return Number((await info(redis.admin, 'stats')).get('total_net_input_bytes') ?? 0);
}

/** A stretch between two stamps of the shared clock (ns from `clockBase`), in the profiles' µs. */
function windowOf(clockBase: bigint, startNs: number, endNs: number): Window {
  const baseUs = Number(clockBase / 1000n);
  return { startUs: baseUs + startNs / 1000, endUs: baseUs + endNs / 1000 };
}

/** Median of a list of numbers (0 for none). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

async function connect(
  worker: WorkerHandle,
  session: string,
  contender: ContenderName,
  url: string,
  leaseMs?: number,
): Promise<void> {
  await worker.call({ op: 'connect', session, contender, url, name: `bench-profile-${session}`, leaseMs });
}

/** The many-keys scenario's ops for a lock, and for a kind's waiters. */
function heapOps(kind: HeapPass['kind']): { hold: string; wait: string; heap: string; release: string } {
  return kind === 'lock'
    ? { hold: 'manyKeys.hold', wait: 'manyKeys.wait', heap: 'manyKeys.heap', release: 'manyKeys.release' }
    : {
        hold: 'manyKeysKind.hold',
        wait: 'manyKeysKind.wait',
        heap: 'manyKeysKind.heap',
        release: 'manyKeysKind.release',
      };
}

/**
 * Holds `count` keys and waits on each, as the many-keys scenario does; with `between`, steps
 * run once the keys are held and once they all have their waiter. Returns the scenario's heap
 * figures: [the holds' share, holds and waits together], in bytes. Everything is given back
 * before it returns.
 */
async function holdAndWait(
  worker: WorkerHandle,
  redis: BenchRedis,
  kind: HeapPass['kind'],
  prefix: string,
  count: number,
  between?: { held(): Promise<void>; waited(): Promise<void> },
): Promise<[number, number]> {
  const ops = heapOps(kind);
  const args = { kind, prefix, count };
  const held = await worker.call<boolean | null>({ op: ops.hold, session: 'holder', ...args });
  if (held === false) throw new Error(`the session cannot hold a ${kind}`);
  await between?.held();
  await worker.call({ op: ops.wait, session: 'waiter', ...args });
  await channelsSettled(redis);
  const heap = await worker.call<[number, number]>({ op: ops.heap });
  await between?.waited();
  if (kind === 'lock') {
    const lost = await worker.call<number | null>({ op: 'manyKeys.lost' });
    if (lost !== null && lost > 0) throw new Error(`${lost} holds were lost: the waiters took their locks`);
  }
  await worker.call({ op: ops.release, waitMs: 60_000 }, 300_000);
  if (kind === 'lock') await worker.call({ op: 'manyKeys.end' });
  return heap;
}

/**
 * One heap pass, in a worker of its own; the files it writes go to `dir`. A first round of
 * `WARMUP_KEYS` holds and waits, given back, leaves behind what a process makes once (compiled
 * code, a subscriber connection, the snapshots' own tables), so the snapshots after it see
 * what each held key and each waiter keeps.
 */
async function heapPass(
  redis: BenchRedis,
  clockBase: bigint,
  pass: (typeof HEAP_PASSES)[number],
  waiters: number,
  dir: string,
  origins: Origins,
): Promise<HeapPass> {
  const [worker] = await spawnWorkers(1, clockBase, true);
  if (worker === undefined) throw new Error('no worker');
  const file = (name: string): string => join(dir, `${pass.contender}-${pass.kind}-${name}`);
  const snapshots = [0, 1, 2].map((step) => file(`${step}.heapsnapshot`));
  const profiles = { holder: file('holder.heapprofile'), waiter: file('waiter.heapprofile') };
  const snapshot = async (step: number): Promise<void> => {
    await worker.call({ op: 'profile.heapSnapshot', path: snapshots[step] });
  };
  const sample = async (): Promise<void> => {
    await worker.call({ op: 'profile.heapSampling', intervalBytes: SAMPLING_BYTES });
  };
  const sampled = async (path: string): Promise<void> => {
    await worker.call({ op: 'profile.heapSamplingStop', path });
  };
  const prefix = `bench:profile:${pass.contender}:${pass.kind}`;
  try {
    // A renewing contender keeps its default lease: a heap snapshot stops the process for
    // seconds, longer than the many-keys scenario's 3 s lease, and would lose the holds it
    // weighs. One that never renews gets the scenario's lease that outlasts the pass.
    const leaseMs = ADAPTERS[pass.contender].caps.renews ? undefined : 120_000;
    for (const session of ['holder', 'waiter'])
      await connect(worker, session, pass.contender, redis.url, leaseMs);
    // Sampled too: the first profile taken makes tables of its own (scripts' line ends).
    await sample();
    const channels = await pubsubChannels(redis.admin);
    await holdAndWait(worker, redis, pass.kind, `${prefix}:warm-up`, WARMUP_KEYS);
    // What the round leaves to linger (latchkey's subscriptions, 5 s) goes before the snapshot,
    // not during the holds it would seem to shrink.
    if (pass.keeps !== true) await channelsBackTo(redis, channels, 20_000);
    await sampled(file('warm-up.heapprofile'));
    await snapshot(0);
    await sample();
    const [holderHeap, heap] = await holdAndWait(worker, redis, pass.kind, prefix, waiters, {
      held: async () => {
        await sampled(profiles.holder);
        await snapshot(1);
        await sample();
      },
      waited: async () => {
        await sampled(profiles.waiter);
        await snapshot(2);
      },
    });
    const share = (measured: number, step: number, profile: string): HeapShare =>
      heapShareOf(
        {
          count: waiters,
          measured,
          before: snapshots[step] ?? '',
          after: snapshots[step + 1] ?? '',
          sampled: profile,
        },
        origins,
      );
    return {
      ...pass,
      waiters,
      holder: share(holderHeap, 0, profiles.holder),
      waiter: share(heap - holderHeap, 1, profiles.waiter),
    };
  } finally {
    await worker.stop();
    for (const path of [...snapshots, ...Object.values(profiles), file('warm-up.heapprofile')])
      rmSync(path, { force: true });
  }
}

/** latchkey's and floor-rlock's uncontended cycles by turns in one worker, profiled. */
async function uncontendedLoops(
  redis: BenchRedis,
  clockBase: bigint,
  dir: string,
  origins: Origins,
): Promise<CpuLoop[]> {
  const [worker] = await spawnWorkers(1, clockBase);
  if (worker === undefined) throw new Error('no worker');
  const path = join(dir, 'uncontended.cpuprofile');
  const windows = new Map<ContenderName, Window[]>(CPU_CONTENDERS.map((name) => [name, []]));
  /** Bytes Redis received during each contender's blocks. */
  const sent = new Map<ContenderName, number>();
  try {
    for (const name of CPU_CONTENDERS) await connect(worker, `unc-${name}`, name, redis.url);
    const { warmupRounds, rounds, block } = UNCONTENDED;
    for (let round = 0; round < warmupRounds + rounds; round += 1) {
      if (round === warmupRounds) await worker.call({ op: 'profile.cpuStart', intervalUs: INTERVAL_US });
      for (let k = 0; k < CPU_CONTENDERS.length; k += 1) {
        const name = CPU_CONTENDERS[(round + k) % CPU_CONTENDERS.length] ?? 'latchkey';
        const sentBefore = await bytesReceived(redis);
        const [start, end] = await worker.call<[number, number]>({
          op: 'profile.cycles',
          session: `unc-${name}`,
          key: `bench:profile:${name}:unc`,
          cycles: block,
        });
        if (round < warmupRounds) continue;
        windows.get(name)?.push(windowOf(clockBase, start, end));
        sent.set(name, (sent.get(name) ?? 0) + (await bytesReceived(redis)) - sentBefore);
      }
    }
    await worker.call({ op: 'profile.cpuStop', path });
    for (const name of CPU_CONTENDERS) await worker.call({ op: 'disconnect', session: `unc-${name}` });
  } finally {
    await worker.stop();
  }
  const cycles = UNCONTENDED.rounds * UNCONTENDED.block;
  const loops = CPU_CONTENDERS.map((contender): CpuLoop => {
    const own = windows.get(contender) ?? [];
    return {
      loop: 'uncontended',
      contender,
      cycles,
      wallUs: Math.round((own.reduce((sum, w) => sum + w.endUs - w.startUs, 0) / cycles) * 10) / 10,
      medianUs: Math.round((median(own.map((w) => w.endUs - w.startUs)) / UNCONTENDED.block) * 10) / 10,
      bytesToRedis: Math.round((sent.get(contender) ?? 0) / cycles),
      roles: [cpuRoleOf('process', path, own, cycles, origins)],
    };
  });
  rmSync(path, { force: true });
  return loops;
}

/** latchkey's and floor-rlock's hand-offs by turns between two workers, both profiled. */
async function handoffLoops(
  redis: BenchRedis,
  clockBase: bigint,
  dir: string,
  origins: Origins,
): Promise<CpuLoop[]> {
  const [holder, waiter] = await spawnWorkers(2, clockBase);
  if (holder === undefined || waiter === undefined) throw new Error('no workers');
  const paths = {
    holder: join(dir, 'handoff-holder.cpuprofile'),
    waiter: join(dir, 'handoff-waiter.cpuprofile'),
  };
  const windows = new Map<ContenderName, Window[]>(CPU_CONTENDERS.map((name) => [name, []]));
  const sessions = (name: string): { holder: string; waiter: string } => ({
    holder: `ho-${name}-holder`,
    waiter: `ho-${name}-waiter`,
  });
  try {
    for (const name of CPU_CONTENDERS) {
      await connect(holder, sessions(name).holder, name, redis.url);
      await connect(waiter, sessions(name).waiter, name, redis.url);
    }
    const key = (name: string): string => `bench:profile:${name}:handoff`;
    for (const name of CPU_CONTENDERS)
      for (let i = 0; i < HANDOFF.warmup; i += 1)
        await oneHandoff(holder, waiter, sessions(name), key(name), HANDOFF.warmupSettleMs);
    await Promise.all(
      [holder, waiter].map((one) => one.call({ op: 'profile.cpuStart', intervalUs: INTERVAL_US })),
    );
    for (let round = 0; round < HANDOFF.rounds; round += 1) {
      for (let k = 0; k < CPU_CONTENDERS.length; k += 1) {
        const name = CPU_CONTENDERS[(round + k) % CPU_CONTENDERS.length] ?? 'latchkey';
        for (let i = 0; i < HANDOFF.block; i += 1) {
          const one = await oneHandoff(holder, waiter, sessions(name), key(name), HANDOFF.settleMs);
          const releasing = one.intervals[0]?.[1] ?? 0;
          windows.get(name)?.push(windowOf(clockBase, releasing, releasing + one.handoffNs));
        }
      }
    }
    await holder.call({ op: 'profile.cpuStop', path: paths.holder });
    await waiter.call({ op: 'profile.cpuStop', path: paths.waiter });
    for (const name of CPU_CONTENDERS) {
      await holder.call({ op: 'disconnect', session: sessions(name).holder });
      await waiter.call({ op: 'disconnect', session: sessions(name).waiter });
    }
  } finally {
    await Promise.all([holder.stop(), waiter.stop()]);
  }
  const cycles = HANDOFF.rounds * HANDOFF.block;
  const loops = CPU_CONTENDERS.map((contender): CpuLoop => {
    const own = windows.get(contender) ?? [];
    return {
      loop: 'handoff',
      contender,
      cycles,
      wallUs: Math.round((own.reduce((sum, w) => sum + w.endUs - w.startUs, 0) / cycles) * 10) / 10,
      medianUs: Math.round(median(own.map((w) => w.endUs - w.startUs)) * 10) / 10,
      roles: [
        cpuRoleOf('holder', paths.holder, own, cycles, origins),
        cpuRoleOf('waiter', paths.waiter, own, cycles, origins),
      ],
    };
  });
  for (const path of Object.values(paths)) rmSync(path, { force: true });
  return loops;
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  const started = Date.now();
  const loadAverage = loadavg().map((load) => Math.round(load * 100) / 100);
  const origins = new Origins(rootDir);
  const dir = mkdtempSync(join(tmpdir(), 'latchkey-profile-'));
  const redis = await startBenchRedis();
  const clockBase = process.hrtime.bigint();
  try {
    const server = await info(redis.admin, 'server');
    const passes: HeapPass[] = [];
    for (const pass of HEAP_PASSES) {
      console.log(`heap: ${pass.label}, ${cli.waiters} held keys with a waiter each`);
      await flushIfOwned(redis);
      passes.push(await heapPass(redis, clockBase, pass, cli.waiters, dir, origins));
    }
    console.log('cpu: uncontended cycles');
    const loops = await uncontendedLoops(redis, clockBase, dir, origins);
    console.log('cpu: hand-offs');
    loops.push(...(await handoffLoops(redis, clockBase, dir, origins)));
    const results: ProfileResults = {
      env: {
        date: new Date().toISOString(),
        node: process.version,
        redis: server.get('redis_version') ?? 'unknown',
        cpuModel: cpus()[0]?.model ?? 'unknown',
        cores: cpus().length,
        os: `${type()} ${release()} ${arch()}`,
        loadAverage,
        seconds: Math.round((Date.now() - started) / 1000),
      },
      heap: { waiters: cli.waiters, passes },
      cpu: {
        intervalUs: INTERVAL_US,
        windows: {
          uncontended: `blocks of ${UNCONTENDED.block} acquire + release cycles, by turns with the other contender (${UNCONTENDED.rounds} blocks each after ${UNCONTENDED.warmupRounds} untimed)`,
          handoff: `from just before the holder's release() to the waiter's acquire resolving, in both processes; the waiter given ${HANDOFF.settleMs} ms to be blocked, ${HANDOFF.block} hand-offs a turn (after ${HANDOFF.warmup} untimed per contender)`,
        },
        loops,
      },
    };
    mkdirSync(cli.out, { recursive: true });
    for (const path of writeProfileReport(results, cli.out)) console.log(`wrote ${path}`);
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
