/**
 * An abort that lands while an acquire attempt (the acquire script call) is in flight: Redis
 * is paused (SIGSTOP of the file's own redis-server), so the attempt gets no reply until it
 * resumes. The acquire must reject with exactly `signal.reason` within a few tens of ms of the
 * abort, while Redis is still paused, not at its next wake-up: the reply to the attempt, or,
 * for a waiter that goes back to its wait after the reply, whenever something next wakes it
 * (for a waiter behind the head of its client's local queue, nothing may). And once Redis runs
 * again, the caller that gave up leaves nothing behind: no entry in the wait queue, and no
 * hold taken by its attempt (which a watchdog would renew forever).
 *
 * Cases: a single waiter whose first attempt finds the lock held; the same with the lock free,
 * so the attempt takes it; and two waiters of one LockClient on one lock, where the second (not
 * the head locally) is aborted while a re-check attempt of its own is in flight. Attempts are
 * seen by wrapping the connection's sendCommand, which also pauses Redis right before the
 * re-check attempt goes out.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { queueOf, uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { interceptCommands } from '../support/clients.js';
import { testResources, type Redis } from '../support/resources.js';
import { settle, sleep, waitUntil, within, type Settled } from '../support/wait.js';

/** From abort() to the rejection. */
const ABORT_BOUND_MS = 100;
/** How long Redis stays paused after the abort (shorter than the default command timeout). */
const PAUSED_AFTER_ABORT_MS = 1_000;
/** How soon after Redis resumes the aborted caller must have left nothing behind. */
const CLEAN_WITHIN_MS = 2_000;
/** How long after Redis resumes an acquire still pending is waited for, to report it. */
const PENDING_GRACE_MS = 2_000;
const acquireScript = luaScripts['lock/acquire'];
/** Where ARGV[4] (the queue entry the attempt would push) sits in EVALSHA sha 4 k1 k2 k3 k4 a1 ... a7. */
const MEMBER_ARG = 3 + 4 + 3;
/** Where ARGV[5] (the entry an earlier attempt left in the queue) sits. */
const QUEUED_AS_ARG = MEMBER_ARG + 1;

function isAcquire(args: readonly string[]): boolean {
  return (
    (args[0] === 'EVALSHA' && args[1] === acquireScript.sha1) ||
    (args[0] === 'EVAL' && args[1] === acquireScript.source)
  );
}

/** One acquire-script call, as it left the client. Entries hold the owner field: never print them. */
interface AcquireCall {
  readonly member: string;
  readonly queuedAs: string;
  readonly at: number;
}

interface Observed {
  readonly locks: LockClient;
  /** Every acquire-script call sent so far. */
  readonly calls: AcquireCall[];
  /** Runs before an acquire-script call is handed to the connection, which waits for it. */
  before: ((call: AcquireCall) => Promise<void> | void) | undefined;
}

describe('an abort while an acquire attempt is in flight', () => {
  let server: RedisInstance;
  let admin: Redis;
  const perFile = testResources(() => server.url);
  const res = testResources(() => server.url);

  beforeAll(async () => {
    server = await startRedis();
    admin = await perFile.connect();
  });

  afterEach(async () => {
    // A test that failed halfway may have left the server paused.
    await server.resume();
    await res.closeAll();
  });

  afterAll(async () => {
    await perFile.closeAll();
    // Unset when beforeAll could not start a server; its own error says why.
    await server?.stop();
  });

  /** A LockClient whose acquire-script calls are seen (and can be held back) on their way out. */
  async function observedClient(keyPrefix: string, connectionName: string): Promise<Observed> {
    const redis = await res.connectLocks({ name: connectionName });
    const calls: AcquireCall[] = [];
    let before: Observed['before'];
    const client = interceptCommands(redis, (args) => {
      if (!isAcquire(args)) return undefined;
      const call = {
        member: args[MEMBER_ARG] ?? '',
        queuedAs: args[QUEUED_AS_ARG] ?? '',
        at: performance.now(),
      };
      calls.push(call);
      const hold = before;
      return hold === undefined ? undefined : Promise.resolve(hold(call));
    });
    return {
      locks: res.track(new LockClient(client, { keyPrefix })),
      calls,
      get before() {
        return before;
      },
      set before(hook) {
        before = hook;
      },
    };
  }

  /**
   * Has `locks` wait for a lock once, so it listens for hand-overs (its later attempts carry a
   * queue entry) and has the scripts loaded (the attempt held back is the script call itself).
   */
  async function warmUp(locks: LockClient, keyPrefix: string): Promise<void> {
    const holder = await res.lockClient({ keyPrefix });
    const held = await holder.lock('warm-up').acquire();
    const waiting = locks.lock('warm-up').acquire();
    await waitUntil(
      'the warm-up waiter is queued',
      async () => Number(await admin.lLen(queueOf(`${keyPrefix}warm-up`))) === 1,
      5_000,
    );
    await held.release();
    await (await within(waiting, 5_000, 'the warm-up hand-over')).release();
  }

  /**
   * Aborts `controller` with `reason`, keeps Redis paused for PAUSED_AFTER_ABORT_MS, resumes
   * it, and reports how the acquire settled (undefined: still pending PENDING_GRACE_MS after
   * the resume).
   */
  async function abortWhilePaused(
    waiting: Promise<Settled<unknown>>,
    controller: AbortController,
    reason: unknown,
  ): Promise<{ settled: Settled<unknown> | undefined; abortedAt: number; resumedAt: number }> {
    const abortedAt = performance.now();
    controller.abort(reason);
    let settled = await Promise.race([waiting, sleep(PAUSED_AFTER_ABORT_MS).then(() => undefined)]);
    // Redis stays paused that long either way: what the client does about the abort must
    // cope with a server that does not answer.
    await sleep(abortedAt + PAUSED_AFTER_ABORT_MS - performance.now());
    // Redis runs again: the attempt's reply comes in, and whatever the client does about it.
    const resumedAt = performance.now();
    await server.resume();
    settled ??= await Promise.race([waiting, sleep(PENDING_GRACE_MS).then(() => undefined)]);
    return { settled, abortedAt, resumedAt };
  }

  /** Asserts the rejection: exactly `reason`, within ABORT_BOUND_MS of the abort, before Redis resumed. */
  function expectPromptRejection(
    outcome: { settled: Settled<unknown> | undefined; abortedAt: number; resumedAt: number },
    reason: unknown,
  ): void {
    const { settled, abortedAt, resumedAt } = outcome;
    const afterMs = settled === undefined ? Number.POSITIVE_INFINITY : settled.at - abortedAt;
    const pausedMs = (resumedAt - abortedAt).toFixed(0);
    expect(
      afterMs,
      settled === undefined
        ? `the aborted acquire was still pending ${PAUSED_AFTER_ABORT_MS + PENDING_GRACE_MS} ms after the abort ` +
            `(Redis stayed paused for ${pausedMs} ms of it)`
        : `the aborted acquire rejected ${afterMs.toFixed(1)} ms after the abort ` +
            `(Redis resumed ${pausedMs} ms after the abort)`,
    ).toBeLessThanOrEqual(ABORT_BOUND_MS);
    expect(settled?.error, 'the rejection is exactly signal.reason').toBe(reason);
    expect(settled !== undefined && settled.at < resumedAt, 'it rejected while Redis was still paused').toBe(
      true,
    );
  }

  /** Whether the lock's owner fields are exactly `fields` (compared, never printed: they are secret). */
  async function heldBy(key: string, fields: readonly string[]): Promise<boolean> {
    const now = await admin.hKeys(key);
    return now.length === fields.length && now.every((field) => fields.includes(field));
  }

  /** Polls `state` until `done(state)` or CLEAN_WITHIN_MS, and returns the last state. */
  async function settledState<T>(state: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
    const deadline = performance.now() + CLEAN_WITHIN_MS;
    let value = await state();
    while (!done(value) && performance.now() < deadline) {
      await sleep(20);
      value = await state();
    }
    return value;
  }

  it('a single waiter whose first attempt finds the lock held rejects at once and leaves no queue entry', async () => {
    const keyPrefix = uniquePrefix('abort-in-flight-held');
    const key = `${keyPrefix}invoice:1`;
    const holder = await res.lockClient({ keyPrefix });
    await holder.lock('invoice:1').acquire();
    const holderFields = await admin.hKeys(key);
    expect(holderFields.length).toBe(1);
    const y = await observedClient(keyPrefix, 'abort-in-flight-y');
    await warmUp(y.locks, keyPrefix);
    y.calls.length = 0;

    await server.pause();
    const controller = new AbortController();
    const reason = { why: 'request cancelled while Redis was stalled' };
    const waiting = settle(y.locks.lock('invoice:1').acquire({ signal: controller.signal }));
    await waitUntil('the attempt is sent', () => y.calls.length === 1, 2_000);
    const [call] = y.calls;
    expect(call !== undefined && call.member !== '', 'set-up: the attempt carries a queue entry').toBe(true);
    await sleep(50);
    const outcome = await abortWhilePaused(waiting, controller, reason);
    expectPromptRejection(outcome, reason);

    const entries = await settledState(
      () => admin.lRange(queueOf(key), 0, -1),
      (list) => !list.includes(call?.member ?? ''),
    );
    expect(
      entries.includes(call?.member ?? ''),
      `the aborted waiter's entry is still in the wait queue ${CLEAN_WITHIN_MS} ms after Redis resumed`,
    ).toBe(false);
    expect(await heldBy(key, holderFields), 'the holder still holds the lock, alone').toBe(true);
  });

  it('a single acquire whose attempt finds the lock free rejects at once and does not keep the lock it took', async () => {
    const keyPrefix = uniquePrefix('abort-in-flight-free');
    const key = `${keyPrefix}invoice:2`;
    // The default watchdog lease (30 s): a lock the client kept would stay for the whole test.
    const y = await observedClient(keyPrefix, 'abort-in-flight-y');
    await warmUp(y.locks, keyPrefix);
    y.calls.length = 0;
    expect(await admin.exists(key)).toBe(0);

    await server.pause();
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const lock = y.locks.lock('invoice:2');
    const waiting = settle(lock.acquire({ signal: controller.signal }));
    await waitUntil('the attempt is sent', () => y.calls.length === 1, 2_000);
    const [call] = y.calls;
    await sleep(50);
    const outcome = await abortWhilePaused(waiting, controller, reason);
    expectPromptRejection(outcome, reason);

    // The attempt took the lock when Redis read it; the client gives it back.
    const exists = await settledState(
      () => admin.exists(key),
      (count) => count === 0,
    );
    expect(
      exists,
      `the lock taken by the aborted attempt is still held ${CLEAN_WITHIN_MS} ms after Redis resumed`,
    ).toBe(0);
    expect(
      (await admin.lRange(queueOf(key), 0, -1)).includes(call?.member ?? ''),
      'the aborted acquire left an entry in the wait queue',
    ).toBe(false);
    expect(await lock.isLocked()).toBe(false);
    // Nor does the watchdog bring it back.
    await sleep(200);
    expect(await admin.exists(key)).toBe(0);
  });

  it('the second of two local waiters, aborted during a re-check attempt, rejects at once and leaves the queue', async () => {
    const keyPrefix = uniquePrefix('abort-in-flight-second');
    const name = 'invoice:3';
    const key = keyPrefix + name;
    const connectionName = `abort-in-flight-${keyPrefix.slice(-9, -1)}`;
    const holder = await res.lockClient({ keyPrefix });
    const held = await holder.lock(name).acquire();
    const holderFields = await admin.hKeys(key);
    const y = await observedClient(keyPrefix, connectionName);
    await warmUp(y.locks, keyPrefix);

    // W1 is the head of Y's local queue, W2 second; both are queued in Redis, in that order.
    const first = settle(y.locks.lock(name).acquire());
    await waitUntil('W1 is queued', async () => Number(await admin.lLen(queueOf(key))) === 1, 5_000);
    const controller = new AbortController();
    const reason = { why: 'the second waiter gave up' };
    const second = settle(y.locks.lock(name).acquire({ signal: controller.signal }));
    await waitUntil('W2 is queued', async () => Number(await admin.lLen(queueOf(key))) === 2, 5_000);
    const [firstMember, secondMember] = await admin.lRange(queueOf(key), 0, -1);
    if (firstMember === undefined || secondMember === undefined) throw new Error('set-up: no queue entries');
    // Let W2's reply come in, so it is parked in its wait behind W1.
    await sleep(50);

    // Redis is paused right before W2's next attempt goes out.
    let pausedAt: number | undefined;
    y.before = async (call) => {
      if (call.queuedAs !== secondMember || pausedAt !== undefined) return;
      pausedAt = performance.now();
      await server.pause();
    };
    // The subscriber reconnects after CLIENT KILL: every local waiter checks its place again.
    const clients = String(await admin.sendCommand<unknown>(['CLIENT', 'LIST', 'TYPE', 'PUBSUB']))
      .split('\n')
      .filter((line) => line.includes(` name=${connectionName} `));
    expect(clients.length, "set-up: Y's subscriber connection").toBe(1);
    const id = /(?:^|\s)id=(\d+)/.exec(clients[0] ?? '')?.[1] ?? '';
    await admin.sendCommand(['CLIENT', 'KILL', 'ID', id]);
    await waitUntil("W2's re-check attempt is sent", () => pausedAt !== undefined, 5_000);

    await sleep(50);

    const outcome = await abortWhilePaused(second, controller, reason);
    expectPromptRejection(outcome, reason);

    const entries = await settledState(
      () => admin.lRange(queueOf(key), 0, -1),
      (list) => !list.includes(secondMember),
    );
    expect(
      entries.includes(secondMember),
      `W2's entry is still in the wait queue ${CLEAN_WITHIN_MS} ms after Redis resumed`,
    ).toBe(false);
    // W1 alone is queued: W2 left no entry, neither its old one nor one its attempt pushed.
    expect(entries.length, 'entries in the wait queue').toBe(1);
    expect(entries.includes(firstMember), 'W1 is still queued').toBe(true);
    expect(await heldBy(key, holderFields), 'the holder still holds the lock, alone').toBe(true);

    // W1 still waits, and gets the lock when the holder lets it go.
    await held.release();
    const got = await within(first, 2_000, "W1's acquire");
    expect(got.error).toBeUndefined();
  });
});
