/**
 * Mutual exclusion under contention from several processes: 4 processes with 5 async tasks
 * each increment one counter the unsafe way (GET, pause, SET) under one lock. The count comes
 * out exact, every value is read exactly once, and no two critical sections, stamped with the
 * machine's monotonic clock, overlap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { describeOverlaps, overlaps, type Interval } from './intervals.js';
import { scaled } from './scale.js';

const WORKER = new URL('./fixtures/torture-worker.ts', import.meta.url).pathname;
const PROCESSES = 4;
const TASKS = 5;
const ITERATIONS = scaled(10, 50);
// Child processes start through tsx, which takes a while on a busy machine, and here four
// start at once.
const STARTUP_MS = 40_000;
// Generous: sections are 0-5 ms each, but four processes share two cores with other tests.
const RUN_MS = scaled(25_000, 120_000);

interface Section {
  readonly interval: Interval;
  readonly read: number;
  readonly lost: boolean;
}

function parseSections(pid: number, value: unknown): Section[] {
  if (!Array.isArray(value)) throw new Error(`worker ${pid} sent no sections`);
  return value.map((raw: unknown) => {
    if (!Array.isArray(raw) || raw.length !== 6) throw new Error(`worker ${pid} sent a malformed section`);
    const [start, end, read, task, iteration, lost] = raw as unknown[];
    if (typeof start !== 'string' || typeof end !== 'string' || typeof read !== 'number') {
      throw new Error(`worker ${pid} sent a malformed section`);
    }
    return {
      interval: {
        start: BigInt(start),
        end: BigInt(end),
        who: `pid ${pid} task ${String(task)} #${String(iteration)}`,
      },
      read,
      lost: lost === true,
    };
  });
}

describe('torture: unsafe increments from several processes under one lock', () => {
  let server: RedisInstance;
  let observer: Redis;
  const res = testResources(() => server.url);

  beforeAll(async () => {
    server = await startRedis();
    observer = await res.connect();
  });

  afterAll(async () => {
    await res.closeAll();
    // Unset when beforeAll could not start a server; its own error says why.
    await server?.stop();
  });

  it(
    `${PROCESSES} processes x ${TASKS} tasks x ${ITERATIONS} increments: exact count, no overlapping sections`,
    async ({ annotate }) => {
      const keyPrefix = uniquePrefix('torture');
      const counterKey = `${keyPrefix}counter`;
      const env = {
        REDIS_URL: server.url,
        KEY_PREFIX: keyPrefix,
        LOCK_NAME: 'ledger',
        COUNTER_KEY: counterKey,
        TASKS: String(TASKS),
        ITERATIONS: String(ITERATIONS),
      };
      const workers = Array.from({ length: PROCESSES }, () => res.worker(WORKER, env));
      await Promise.all(workers.map((worker) => worker.next((msg) => msg['type'] === 'ready', STARTUP_MS)));

      // Everyone starts at once, so the first rounds contend as hard as the later ones.
      for (const worker of workers) worker.send({ type: 'go' });
      const results = await Promise.all(
        workers.map((worker) =>
          worker.next((msg) => msg['type'] === 'done' || msg['type'] === 'failed', RUN_MS),
        ),
      );
      for (const result of results) expect(result['message'], 'a worker failed').toBeUndefined();
      const sections = results.flatMap((result, index) =>
        parseSections(workers[index]?.pid ?? -1, result['sections']),
      );

      const total = PROCESSES * TASKS * ITERATIONS;
      expect(sections).toHaveLength(total);
      expect(await observer.get(counterKey)).toBe(String(total));
      // Each value is read once: a lost update would show up as a repeated read.
      expect(
        sections
          .map((section) => section.read)
          .sort((a, b) => a - b)
          .every((read, index) => read === index),
      ).toBe(true);
      expect(sections.filter((section) => section.lost)).toHaveLength(0);

      const intervals = sections.map((section) => section.interval);
      const found = overlaps(intervals);
      expect(found.count, describeOverlaps(found.pairs)).toBe(0);

      // Every lease was given back: nothing holds the lock any more.
      expect(await observer.exists(`${keyPrefix}ledger`)).toBe(0);
      // Hand-over gaps: from the end of one section to the start of the next, whoever ran it.
      const ordered = [...intervals].sort((a, b) => (a.start < b.start ? -1 : 1));
      const gapsMs = ordered
        .slice(1)
        .map((next, index) => Number(next.start - (ordered[index]?.end ?? next.start)) / 1e6)
        .sort((a, b) => a - b);
      const spanMs = Number((ordered.at(-1)?.end ?? 0n) - (ordered[0]?.start ?? 0n)) / 1e6;
      await annotate(
        `${total} sections in ${spanMs.toFixed(0)} ms; hand-over gap median ` +
          `${(gapsMs[Math.floor(gapsMs.length / 2)] ?? 0).toFixed(2)} ms, ` +
          `p99 ${(gapsMs[Math.floor(gapsMs.length * 0.99)] ?? 0).toFixed(2)} ms, ` +
          `max ${(gapsMs.at(-1) ?? 0).toFixed(2)} ms`,
      );

      for (const worker of workers) worker.send({ type: 'exit' });
      const exits = await Promise.all(workers.map((worker) => worker.exited));
      expect(exits).toEqual(workers.map(() => ({ code: 0, signal: null })));
    },
    STARTUP_MS + RUN_MS + 10_000,
  );
});
