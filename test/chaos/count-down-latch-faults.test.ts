/**
 * The count-down latch under server-side faults, on a redis-server of this file's own. Waiters
 * in worker processes and in this process await a latch with no expiry (so only a message or a
 * re-check after a reconnect can wake them) while the count is driven to zero:
 * - subscriber connections killed with CLIENT KILL TYPE pubsub just before the last count-down,
 *   and again every 20-80 ms while the count goes down;
 * - SCRIPT FLUSH every 50 ms while three clients count down concurrently: every count-down
 *   succeeds and is counted once (the counts they return are exactly n-1 ... 0);
 * - Redis restarted without persistence: the latch is gone with the data, which opens it, and
 *   waiters across the restart return true once reconnected; waiters on a new latch afterwards
 *   are woken by its zero message.
 * Every waiter returns true promptly after the count reaches zero, and none before.
 * Also: a count-down whose connection is killed by CLIENT KILL while Redis holds it is retried
 * on a new connection and counted once.
 */
import { describe, expect, it } from 'vitest';
import { LockClient } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import type { Worker } from '../support/child.js';
import { uniquePrefix } from '../support/keys.js';
import { commandsFrom } from '../support/monitor.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';
import { ownServer } from './own-server.js';

const LATCH_WAITER = new URL('../support/fixtures/latch-waiter.ts', import.meta.url).pathname;
// Child processes start through tsx, which takes a while on a busy machine.
const STARTUP_MS = 20_000;
/** How soon after the count reaches zero every waiter must have returned. */
const WAKE_BOUND_MS = 1_500;
/** Worker processes, each with one LockClient and two awaits. */
const WORKERS = 2;
/** LockClients in this process, each with two awaits. */
const LOCAL_CLIENTS = 2;
const AWAITS_PER_CLIENT = 2;
const SUBSCRIBERS = WORKERS + LOCAL_CLIENTS;

function randomInt(below: number): number {
  return Math.floor(Math.random() * below);
}

function nowNs(): bigint {
  return process.hrtime.bigint();
}

function latchChannelOf(key: string): string {
  return `redisson_countdownlatch__channel__{${key}}`;
}

/** Retries `fn` while the server is coming back. */
async function retrying<T>(fn: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await sleep(50);
    }
  }
}

/** When a wait ended (monotonic ns) and with what. */
interface Ended {
  readonly who: string;
  readonly opened: unknown;
  readonly at: bigint;
}

describe('count-down latch under faults', () => {
  const env = ownServer();
  const { res } = env;

  const killPubsub = async (): Promise<number> =>
    Number(await env.admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']));

  /** Waiters on one latch: two awaits in each of the worker processes and local clients. */
  async function startWaiters(prefix: string, name: string, round: number, workers?: Worker[]) {
    const spawned =
      workers ??
      (await Promise.all(
        Array.from({ length: WORKERS }, async () => {
          const worker = res.worker(LATCH_WAITER, {
            REDIS_URL: env.server.url,
            KEY_PREFIX: prefix,
            LATCH_NAME: name,
          });
          await worker.next((msg) => msg['type'] === 'ready', STARTUP_MS);
          return worker;
        }),
      ));
    const locals: LockClient[] = [];
    for (let c = 0; c < LOCAL_CLIENTS; c += 1) locals.push(await res.lockClient({ keyPrefix: prefix }));
    const ended: Ended[] = [];
    const failures: unknown[] = [];
    const local = locals.flatMap((locks, c) =>
      Array.from({ length: AWAITS_PER_CLIENT }, async (_, a) => {
        try {
          const opened = await locks.countDownLatch(name).await();
          ended.push({ who: `local ${c}.${a}`, opened, at: nowNs() });
        } catch (error) {
          failures.push(error);
        }
      }),
    );
    for (const worker of spawned) {
      for (let a = 0; a < AWAITS_PER_CLIENT; a += 1) worker.send({ type: 'await', id: `${round}.${a}` });
    }
    const fromWorkers = async (): Promise<void> => {
      for (const [w, worker] of spawned.entries()) {
        for (let a = 0; a < AWAITS_PER_CLIENT; a += 1) {
          const msg = await worker.next(
            (m) => (m['type'] === 'ended' || m['type'] === 'failed') && m['id'] === `${round}.${a}`,
            15_000,
          );
          if (msg['type'] === 'failed') failures.push(new Error(String(msg['message'])));
          else ended.push({ who: `worker ${w}.${a}`, opened: msg['opened'], at: BigInt(String(msg['at'])) });
        }
      }
    };
    return {
      workers: spawned,
      ended,
      failures,
      /** Resolves once every wait ended. */
      all: async (): Promise<void> => {
        await within(Promise.all([...local, fromWorkers()]), 20_000, 'the waiters');
      },
    };
  }

  /**
   * A latch of `count` with no expiry, awaited by every waiter; `disrupt` runs once they all
   * wait, then `drive` counts the latch down to zero. Every waiter must return true within
   * WAKE_BOUND_MS of the start of the last count-down, and none before it.
   */
  async function waitersOpen(
    label: string,
    count: number,
    disrupt: () => Promise<number>,
    drive: (latch: ReturnType<LockClient['countDownLatch']>) => Promise<bigint>,
  ): Promise<void> {
    const prefix = uniquePrefix(label);
    const name = 'cache-warmup';
    const driver = await res.lockClient({ keyPrefix: prefix });
    const latch = driver.countDownLatch(name);
    expect(await latch.trySetCount(count)).toBe(true);
    const waiters = await startWaiters(prefix, name, 1);
    await waitUntil(
      'every waiting client subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === SUBSCRIBERS,
      STARTUP_MS,
    );
    await sleep(300);
    expect(waiters.ended).toEqual([]);

    const killed = await disrupt();
    const lastCountDownAt = await drive(latch);
    await waiters.all();
    expect(waiters.failures).toEqual([]);
    expect(waiters.ended).toHaveLength(SUBSCRIBERS * AWAITS_PER_CLIENT);
    const delays = waiters.ended.map((end) => Number(end.at - lastCountDownAt) / 1e6);
    for (const [i, end] of waiters.ended.entries()) {
      expect(end.opened, end.who).toBe(true);
      const delay = delays[i] ?? Number.NaN;
      expect(delay, `${end.who} returned ${delay} ms after the last count-down began`).toBeGreaterThan(0);
      expect(delay, `${end.who} returned ${delay} ms after the last count-down began`).toBeLessThanOrEqual(
        WAKE_BOUND_MS,
      );
    }
    expect(await env.admin.exists(latch.key)).toBe(0);
    for (const worker of waiters.workers) worker.send({ type: 'exit' });
    await sleep(50);
    expect(env.unhandled).toEqual([]);
    console.info(
      `[latch ${label}] ${killed} connections killed before the count-downs; waiters returned ` +
        `${delays.map((delay) => Math.round(delay)).join('/')} ms after the last count-down began`,
    );
  }

  /** Counts `latch` down to zero, `gapMs` apart; resolves with when the last count-down began. */
  async function countToZero(
    latch: ReturnType<LockClient['countDownLatch']>,
    gapMs: number,
  ): Promise<bigint> {
    for (;;) {
      const startedAt = nowNs();
      const left = await latch.countDown();
      if (left === 0) return startedAt;
      await sleep(gapMs);
    }
  }

  it('pubsub connections killed right before the last count-down: every waiter returns true promptly', async () => {
    await waitersOpen(
      'latch-kill-now',
      2,
      async () => Promise.resolve(0),
      async (latch) => {
        // The first count-down while the subscribers are up, the last while they are gone.
        expect(await latch.countDown()).toBe(1);
        expect(await killPubsub()).toBeGreaterThanOrEqual(SUBSCRIBERS);
        const startedAt = nowNs();
        expect(await latch.countDown()).toBe(0);
        return startedAt;
      },
    );
  }, 90_000);

  it('pubsub connections killed every 20-80 ms while the count goes down: every waiter returns true promptly', async () => {
    let kills = 0;
    let killing = false;
    let killer: Promise<void> = Promise.resolve();
    try {
      await waitersOpen(
        'latch-kill-during',
        5,
        async () => {
          killing = true;
          killer = (async (): Promise<void> => {
            while (killing) {
              await sleep(20 + randomInt(61));
              if (killing) kills += await killPubsub();
            }
          })();
          await sleep(200);
          return kills;
        },
        async (latch) => {
          const startedAt = await countToZero(latch, 150);
          // Killing on through the wake-ups too.
          await sleep(300);
          killing = false;
          return startedAt;
        },
      );
    } finally {
      killing = false;
      await killer;
    }
    expect(kills).toBeGreaterThan(0);
  }, 90_000);

  it('SCRIPT FLUSH every 50 ms while three clients count down: each count-down counted once, every waiter true', async () => {
    const COUNT = 30;
    let flushes = 0;
    let flushing = true;
    const flusher = (async (): Promise<void> => {
      while (flushing) {
        await env.admin.sendCommand(['SCRIPT', 'FLUSH']);
        flushes += 1;
        await sleep(50);
      }
    })();
    const returned: number[] = [];
    try {
      await waitersOpen(
        'latch-flush',
        COUNT,
        async () => Promise.resolve(0),
        async (latch) => {
          const prefix = latch.key.slice(0, -latch.name.length);
          const drivers = await Promise.all(
            [0, 1, 2].map(async () =>
              (await res.lockClient({ keyPrefix: prefix })).countDownLatch(latch.name),
            ),
          );
          let lastStartedAt = 0n;
          await Promise.all(
            drivers.map(async (driver) => {
              for (let i = 0; i < COUNT / drivers.length; i += 1) {
                const startedAt = nowNs();
                const left = await driver.countDown();
                returned.push(left);
                if (left === 0) lastStartedAt = startedAt;
                await sleep(10 + randomInt(30));
              }
            }),
          );
          return lastStartedAt;
        },
      );
    } finally {
      flushing = false;
      await flusher;
    }
    // Counted once each: the counts after them are every value from COUNT - 1 down to 0.
    expect([...returned].sort((a, b) => a - b)).toEqual(Array.from({ length: COUNT }, (_, i) => i));
    expect(flushes).toBeGreaterThan(3);
  }, 90_000);

  it('Redis restarted without persistence: waiters across the restart return true (the latch is gone), a new latch wakes its waiters', async () => {
    const prefix = uniquePrefix('latch-restart');
    const name = 'cache-warmup';
    const driver = await res.lockClient({ keyPrefix: prefix });
    const latch = driver.countDownLatch(name);
    expect(await latch.trySetCount(3)).toBe(true);
    const across = await startWaiters(prefix, name, 1);
    await waitUntil(
      'every waiting client subscribed',
      async () => (await res.numsub(latchChannelOf(latch.key))) === SUBSCRIBERS,
      STARTUP_MS,
    );
    await sleep(300);

    await env.server.restart();
    const restartedAt = nowNs();
    await across.all();
    expect(across.failures).toEqual([]);
    expect(across.ended).toHaveLength(SUBSCRIBERS * AWAITS_PER_CLIENT);
    const acrossDelays = across.ended.map((end) => Math.round(Number(end.at - restartedAt) / 1e6));
    for (const end of across.ended) {
      expect(end.opened, end.who).toBe(true);
      expect(Number(end.at - restartedAt) / 1e6, end.who).toBeLessThanOrEqual(5_000);
    }

    // A new latch on the new server, awaited by the same processes (their clients reconnected).
    expect(await retrying(() => latch.trySetCount(2))).toBe(true);
    const after = await startWaiters(prefix, name, 2, across.workers);
    await waitUntil(
      'every waiting client subscribed on the new server',
      async () => (await retrying(() => res.numsub(latchChannelOf(latch.key)))) >= SUBSCRIBERS,
      STARTUP_MS,
    );
    await sleep(300);
    expect(after.ended).toEqual([]);
    const lastStartedAt = await countToZero(latch, 50);
    await after.all();
    expect(after.failures).toEqual([]);
    for (const end of after.ended) {
      expect(end.opened, end.who).toBe(true);
      const delay = Number(end.at - lastStartedAt) / 1e6;
      expect(delay, end.who).toBeGreaterThan(0);
      expect(delay, end.who).toBeLessThanOrEqual(WAKE_BOUND_MS);
    }
    for (const worker of across.workers) worker.send({ type: 'exit' });
    console.info(`[latch restart] waiters across the restart returned ${acrossDelays.join('/')} ms after it`);
  }, 90_000);

  it('a count-down whose connection is killed while Redis holds it is retried and counted once', async () => {
    const ROUNDS = 6;
    const prefix = uniquePrefix('latch-kill-call');
    for (const script of Object.values(luaScripts)) {
      await env.admin.sendCommand(['SCRIPT', 'LOAD', script.source]);
    }
    const connection = await res.connectLocks({ name: 'latch-counter' });
    const locks = res.track(new LockClient(connection, { keyPrefix: prefix, commandTimeoutMs: 3_000 }));
    const latch = locks.countDownLatch('cache-warmup');
    expect(await latch.trySetCount(ROUNDS + 1)).toBe(true);
    const monitor = await res.monitor();

    const counterId = async (): Promise<string> => {
      const list = await env.admin.sendCommand<string>(['CLIENT', 'LIST', 'TYPE', 'normal']);
      const line = list.split('\n').find((entry) => entry.includes(' name=latch-counter '));
      const id = line === undefined ? undefined : /(?:^|\s)id=(\d+)/.exec(line)?.[1];
      if (id === undefined) throw new Error('the counting connection is not connected');
      return id;
    };

    let killedWithCountDown = 0;
    for (let round = 1; round <= ROUNDS; round += 1) {
      const id = await retrying(counterId);
      // Frozen, Redis reads nothing: the count-down and the kill both wait in its sockets,
      // the count-down first. Thawed, it runs the count-down, then the kill drops the
      // connection before the reply is written (or, read in the other order, before the
      // count-down is read at all): either way latchkey cannot know, and retries.
      await env.server.pause();
      const counting = settle(latch.countDown());
      await sleep(50);
      const killing = settle(env.admin.sendCommand(['CLIENT', 'KILL', 'ID', id]));
      await sleep(50);
      await env.server.resume();
      const killed = Number((await killing).value);
      killedWithCountDown += killed;
      const outcome = await within(counting, 15_000, `count-down ${round}`);
      expect(outcome.error).toBeUndefined();
      expect(outcome.value).toBe(ROUNDS + 1 - round);
      expect(await env.admin.get(latch.key)).toBe(String(ROUNDS + 1 - round));
    }
    expect(killedWithCountDown).toBe(ROUNDS);

    const sha = luaScripts['count-down-latch/count-down'].sha1;
    await sleep(200);
    const copies = commandsFrom(monitor.lines, { excludeLua: true }).filter(
      (cmd) => cmd[0] === 'EVALSHA' && cmd[1] === sha,
    );
    const byRequest = new Map<string, number>();
    for (const copy of copies) byRequest.set(copy[4] ?? '', (byRequest.get(copy[4] ?? '') ?? 0) + 1);
    const decrements = commandsFrom(monitor.lines, { clientAddr: 'lua' }).filter(
      (cmd) => cmd[0] === 'decr' && cmd[1] === latch.key,
    );
    // One request per count-down, one DECR per request, however many copies reached Redis.
    expect(byRequest.size).toBe(ROUNDS);
    expect(decrements).toHaveLength(ROUNDS);
    const repeated = [...byRequest.values()].filter((n) => n >= 2).length;
    // At least once, the copy that ran lost its reply and a second copy found its record.
    expect(repeated).toBeGreaterThanOrEqual(1);
    expect(env.unhandled).toEqual([]);
    console.info(
      `[latch kill-call] ${ROUNDS} count-downs across a killed connection; ${repeated} ran before the kill ` +
        `and were answered from their record on retry`,
    );
    expect(await latch.delete()).toBe(true);
  }, 90_000);
});
