/**
 * The semaphore under faults, with real processes: WORKERS worker processes, each running a few
 * async tasks, take 1 or 2 of P permits, hold them a moment and give them back, for a bounded
 * time, while the parent flushes the script cache (SCRIPT FLUSH), kills the connections of every
 * client (CLIENT KILL TYPE normal, then TYPE pubsub: waiters must resubscribe and re-check), and
 * freezes the server (SIGSTOP of redis-server for 600 ms, longer than the workers' 200 ms command
 * timeout: calls time out, are retried and their copies queue up) and one worker (SIGSTOP,
 * SIGCONT) for 1.5 s.
 *
 * Checked throughout: the counter never leaves [0, P] (sampled by the parent), and the sections
 * the workers stamp with the machine's monotonic clock (after an acquire resolved, before its
 * release was sent) never hold more than P permits at once. Checked at the end: every release
 * went through, and the counter is back at P — no permit lost, none duplicated — once the
 * cancels of acquires whose outcome stayed unknown have run.
 */
import { describe, expect, it } from 'vitest';
import type { Worker, WorkerMessage } from '../support/child.js';
import { uniquePrefix } from '../support/keys.js';
import { sleep, waitUntil } from '../support/wait.js';
import { ownServer } from './own-server.js';
import { scaled } from './scale.js';

const WORKER = new URL('./fixtures/semaphore-worker.ts', import.meta.url).pathname;
// Child processes start through tsx, which takes a while on a busy machine.
const STARTUP_MS = 60_000;

const PERMITS = 3;
const WORKERS = 3;
const TASKS = 3;
const MAX_PERMITS = 2;
const HOLD_MS = 20;

interface Section {
  readonly start: bigint;
  readonly end: bigint;
  readonly permits: number;
  readonly who: string;
}

/** The most permits held at any instant by the sections, and one instant where it happened. */
function peak(sections: readonly Section[]): { permits: number; at: bigint } {
  const events = sections.flatMap((section) => [
    { at: section.start, delta: section.permits },
    { at: section.end, delta: -section.permits },
  ]);
  // At one instant, ends go before starts: sections that merely touch do not overlap.
  events.sort((a, b) => (a.at === b.at ? a.delta - b.delta : a.at < b.at ? -1 : 1));
  let held = 0;
  let most = { permits: 0, at: 0n };
  for (const event of events) {
    held += event.delta;
    if (held > most.permits) most = { permits: held, at: event.at };
  }
  return most;
}

function sectionsOf(worker: Worker, done: WorkerMessage): Section[] {
  const raw = done['sections'];
  if (!Array.isArray(raw)) throw new Error('a worker reported no sections');
  return (raw as [string, string, number][]).map(([start, end, permits]) => ({
    start: BigInt(start),
    end: BigInt(end),
    permits,
    who: `pid ${worker.pid}`,
  }));
}

describe('Semaphore under SCRIPT FLUSH, CLIENT KILL and a frozen worker', () => {
  const env = ownServer();
  const { res } = env;

  it('never lets more than P permits out, and gets every permit back', async () => {
    const prefix = uniquePrefix('semaphore-faults');
    const name = 'crawler';
    const key = prefix + name;
    const url = env.server.url;
    const workers = Array.from({ length: WORKERS }, () =>
      res.worker(WORKER, {
        REDIS_URL: url,
        KEY_PREFIX: prefix,
        SEMAPHORE_NAME: name,
        PERMITS: String(PERMITS),
        // Short, so that a frozen server makes calls time out, retry and send copies.
        COMMAND_TIMEOUT_MS: '200',
      }),
    );
    await Promise.all(workers.map((worker) => worker.next((msg) => msg['type'] === 'ready', STARTUP_MS)));

    const durationMs = scaled(7_000, 20_000);
    for (const worker of workers) {
      worker.send({ type: 'loop', tasks: TASKS, durationMs, maxPermits: MAX_PERMITS, holdMs: HOLD_MS });
    }
    const finished = Promise.all(
      workers.map((worker) =>
        worker.next((msg) => msg['type'] === 'done' || msg['type'] === 'failed', durationMs + 60_000),
      ),
    );

    // The parent's own view: the counter never leaves [0, P].
    const samples: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        try {
          const value = await env.admin.get(key);
          if (value !== null) samples.push(Number(value));
        } catch {
          // Killed with everyone else's connection; it reconnects.
        }
        await sleep(5);
      }
    })();

    const faults: string[] = [];
    const startedAt = performance.now();
    let round = 0;
    while (performance.now() - startedAt < durationMs - 500) {
      await sleep(250 + Math.random() * 250);
      try {
        switch (round % 5) {
          case 0:
            await env.admin.sendCommand(['SCRIPT', 'FLUSH']);
            faults.push('script flush');
            break;
          case 1:
            await env.admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
            faults.push('kill normal');
            break;
          case 2:
            await env.admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']);
            faults.push('kill pubsub');
            break;
          case 3:
            // Longer than the workers' command timeout, within their calls' retry window: the
            // calls in flight time out, their copies queue up, and each must apply once.
            await env.server.pause();
            faults.push('redis paused');
            await sleep(600);
            await env.server.resume();
            break;
          default:
            if (!faults.includes('sigstop')) {
              // Longer than the command timeout and the retry window of its calls in flight.
              const frozen = workers[round % WORKERS];
              frozen?.kill('SIGSTOP');
              faults.push('sigstop');
              await sleep(1_500);
              frozen?.kill('SIGCONT');
            }
        }
      } catch {
        // The admin connection may be reconnecting after a kill; the next round goes on.
      }
      round += 1;
    }

    const reports = await finished;
    sampling = false;
    await sampler;
    expect(faults).toEqual(
      expect.arrayContaining(['script flush', 'kill normal', 'kill pubsub', 'redis paused', 'sigstop']),
    );

    for (const report of reports) expect(report['type'], String(report['message'])).toBe('done');
    const sections = reports.flatMap((report, i) => sectionsOf(workers[i] as Worker, report));
    const releaseErrors = reports.reduce((sum, report) => sum + Number(report['releaseErrors']), 0);
    const acquireErrors = reports.reduce((sum, report) => sum + Number(report['acquireErrors']), 0);
    // The workers got work done despite the faults.
    expect(sections.length).toBeGreaterThan(20);
    expect(peak(sections).permits).toBeLessThanOrEqual(PERMITS);
    expect(samples.length).toBeGreaterThan(50);
    expect(Math.min(...samples)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...samples)).toBeLessThanOrEqual(PERMITS);
    expect(releaseErrors).toBe(0);

    // Every permit comes back: acquires that failed with an unknown outcome are cancelled (and
    // give back what they took) in the background.
    await waitUntil(
      'the counter is back at P',
      async () => Number(await env.admin.get(key)) === PERMITS,
      30_000,
    );
    await sleep(500);
    expect(Number(await env.admin.get(key))).toBe(PERMITS);
    expect(await env.admin.pTTL(key)).toBe(-1);
    console.log(
      `semaphore faults: ${sections.length} sections, peak ${peak(sections).permits}/${PERMITS} permits, ` +
        `${acquireErrors} acquires ended by timeout or error, faults: ${faults.join(', ')}`,
    );
    expect(env.unhandled).toEqual([]);
  }, 180_000);
});
