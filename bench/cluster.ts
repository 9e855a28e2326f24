// Entry of `npm run bench:cluster`: latchkey's `Lock` on one Redis Cluster node against one
// standalone server, both local redis-servers on loopback: the uncontended cycle (acquire +
// release, one key) and the handoff (a holder releases while a waiter on another LockClient is
// blocked in acquire; from just before release() to just after the waiter's acquire resolves).
// Both LockClients run in this process, so the handoff has no process boundary in it; the two
// topologies are measured the same way, one after the other. Prints one line per topology and
// writes bench/results/cluster.md.
//   --quick   fewer rounds (well under a minute)
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from 'redis';
import type { LockRedisClient } from 'latchkey';
import { latchkey } from './latchkey-package.js';
import { connectCluster, startCluster } from '../test/support/cluster.js';
import { startBenchRedis } from './redis.js';
import { latency, type Latency } from './stats.js';

const { LockClient } = latchkey;

const quick = process.argv.includes('--quick');
const CYCLES = quick ? 1_000 : 5_000;
const HANDOFFS = quick ? 100 : 400;
/** How long the waiter gets to be blocked (first attempt answered, subscribed) before the release. */
const SETTLE_MS = 15;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface Line {
  readonly topology: string;
  readonly cycle: Latency;
  readonly handoff: Latency;
}

async function measure(topology: string, a: LockRedisClient, b: LockRedisClient): Promise<Line> {
  const holder = new LockClient(a);
  const waiter = new LockClient(b);
  try {
    const lock = holder.lock(`bench-cluster:${topology}:cycle`);
    for (let i = 0; i < 200; i += 1) await (await lock.acquire()).release();
    const cycles: number[] = [];
    for (let i = 0; i < CYCLES; i += 1) {
      const start = process.hrtime.bigint();
      await (await lock.acquire()).release();
      cycles.push(Number(process.hrtime.bigint() - start));
    }
    const handoffs: number[] = [];
    const name = `bench-cluster:${topology}:handoff`;
    for (let i = 0; i < HANDOFFS + 20; i += 1) {
      const held = await holder.lock(name).acquire();
      const waiting = waiter.lock(name).acquire({ waitMs: 10_000 });
      await sleep(SETTLE_MS);
      const start = process.hrtime.bigint();
      await held.release();
      const taken = await waiting;
      if (i >= 20) handoffs.push(Number(process.hrtime.bigint() - start));
      await taken.release();
    }
    return { topology, cycle: latency(cycles), handoff: latency(handoffs) };
  } finally {
    await Promise.all([holder.close(), waiter.close()]);
  }
}

const ms = (value: number): string => value.toFixed(3);

function render(line: Line): string {
  return (
    `| ${line.topology} | ${ms(line.cycle.p50Ms)} | ${ms(line.cycle.p99Ms)} | ` +
    `${ms(line.handoff.p50Ms)} | ${ms(line.handoff.p99Ms)} |`
  );
}

async function main(): Promise<void> {
  const lines: Line[] = [];
  const standalone = await startBenchRedis();
  try {
    const [a, b] = [createClient({ url: standalone.url }), createClient({ url: standalone.url })];
    await Promise.all([a.connect(), b.connect()]);
    lines.push(await measure('standalone', a, b));
    a.destroy();
    b.destroy();
  } finally {
    await standalone.stop();
  }
  const cluster = await startCluster();
  try {
    const [a, b] = [await connectCluster(cluster), await connectCluster(cluster)];
    lines.push(await measure('cluster (3 masters + 3 replicas)', a, b));
    a.destroy();
    b.destroy();
  } finally {
    await cluster.stop();
  }
  const table = [
    `latchkey Lock, ${CYCLES} uncontended cycles and ${HANDOFFS} handoffs per topology${quick ? ' (quick)' : ''}, ms:`,
    '',
    '| topology | cycle p50 | cycle p99 | handoff p50 | handoff p99 |',
    '| --- | --- | --- | --- | --- |',
    ...lines.map(render),
    '',
  ].join('\n');
  console.log(table);
  writeFileSync(join(dirname(fileURLToPath(import.meta.url)), 'results', 'cluster.md'), table);
}

// The servers' child processes and pipes are unref'd: this keeps the process up until the end.
const keepAlive = setInterval(() => undefined, 1_000);
main().then(
  () => {
    clearInterval(keepAlive);
    process.exit(0);
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
