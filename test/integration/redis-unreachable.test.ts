/**
 * Redis going away is reported, not only suffered. While nothing a LockClient sends (nor its
 * subscriber connection) is answered for `commandTimeoutMs`, the client emits `redisUnreachable`
 * (the first time also a process warning `LATCHKEY_REDIS_UNREACHABLE`, once per client) and
 * `redisReachable` when Redis answers again; the waits go on meanwhile and get in once it is back.
 * The redis-server is the test's own, killed and started again for real.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type {
  LockClient,
  LockClientOptions,
  RedisReachableEvent,
  RedisUnreachableEvent,
} from '../../src/index.js';
import { cannot } from '../support/clients.js';
import { uniquePrefix } from '../support/keys.js';
import { KINDS } from '../support/kinds.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources } from '../support/resources.js';
import { settle, sleep, waitUntil, within } from '../support/wait.js';

const COMMAND_TIMEOUT_MS = 400;
/**
 * How late an event may come after it is due: a timer's lateness on a busy machine, plus one
 * retry's backoff (at most 1 s) for a call that failed before its time was up.
 */
const LATE_MS = 2_500;
/** Long enough for every wait below to outlast the outage and the restart. */
const WAIT_MS = 25_000;
const WARNING_CODE = 'LATCHKEY_REDIS_UNREACHABLE';

/** Something to wait for while Redis is gone. */
interface Waitable {
  readonly name: string;
  /** A first call on `name` that needs no wait, so the client has talked to Redis before. */
  warm(locks: LockClient, name: string): Promise<unknown>;
  /** Waits for `name`, up to `waitMs` (undefined: the default); resolves once it got in. */
  wait(locks: LockClient, name: string, waitMs: number | undefined): Promise<unknown>;
}

const LOCK_KINDS: Waitable[] = KINDS.map((kind) => ({
  name: kind.name,
  warm: async (locks, name) => (await kind.handle(locks, name).acquire()).release(),
  wait: (locks, name, waitMs) =>
    kind.handle(locks, name).acquire(waitMs === undefined ? undefined : { waitMs }),
}));

const SEMAPHORE: Waitable = {
  name: 'semaphore',
  warm: (locks, name) => locks.semaphore(name, { permits: 1 }).tryAcquire(),
  wait: (locks, name, waitMs) =>
    locks.semaphore(name, { permits: 1 }).acquire(waitMs === undefined ? undefined : { waitMs }),
};

const LATCH: Waitable = {
  name: 'countDownLatch',
  warm: (locks, name) => locks.countDownLatch(name).await({ waitMs: 0 }),
  // A latch that Redis no longer has is open: the wait resolves true once Redis answers.
  wait: async (locks, name, waitMs) => {
    if (!(await locks.countDownLatch(name).await(waitMs === undefined ? undefined : { waitMs }))) {
      throw new Error(`latch "${name}" did not open`);
    }
  },
};

const WAITABLES: readonly Waitable[] = [...LOCK_KINDS, SEMAPHORE, LATCH];

/** What one LockClient reported, stamped with the monotonic time it arrived. */
interface Reports {
  readonly unreachable: { readonly at: number; readonly event: RedisUnreachableEvent }[];
  readonly reachable: { readonly at: number; readonly event: RedisReachableEvent }[];
}

function reportsOf(locks: LockClient): Reports {
  const reports: Reports = { unreachable: [], reachable: [] };
  locks.on('redisUnreachable', (event) => reports.unreachable.push({ at: performance.now(), event }));
  locks.on('redisReachable', (event) => reports.reachable.push({ at: performance.now(), event }));
  return reports;
}

/** A library that reports no connection errors: see cannot() in clients.ts. */
const silent = cannot('subscriber-errors') !== undefined;

describe('while Redis is unreachable', () => {
  let server: RedisInstance;
  const res = testResources(() => server.url);
  let down = false;
  const kill = async (): Promise<void> => {
    down = true;
    await server.kill();
  };
  const restart = async (): Promise<void> => {
    await server.restart();
    down = false;
  };
  const warnings: { readonly at: number; readonly message: string }[] = [];
  const onWarning = (warning: Error & { code?: string }): void => {
    if (warning.code === WARNING_CODE) warnings.push({ at: performance.now(), message: warning.message });
  };

  beforeAll(async () => {
    server = await startRedis();
    process.on('warning', onWarning);
  });

  afterEach(async () => {
    // A test that failed with Redis down leaves it running for the next one.
    if (down) await restart();
    await res.closeAll();
    warnings.length = 0;
  });

  afterAll(async () => {
    process.off('warning', onWarning);
    await server.stop();
  });

  async function client(options: LockClientOptions): Promise<LockClient> {
    return res.lockClient({ commandTimeoutMs: COMMAND_TIMEOUT_MS, ...options });
  }

  it.skipIf(silent)(
    'a waiter with default options: reported after commandTimeoutMs, warned once, and it gets the lock when Redis is back',
    async () => {
      const prefix = uniquePrefix('unreachable');
      const holder = await client({ keyPrefix: prefix });
      const locks = await client({ keyPrefix: prefix });
      const reports = reportsOf(locks);
      await holder.lock('invoice:1').acquire({ leaseMs: 60_000 });
      // Every call of this client goes out after this instant.
      const waitFrom = performance.now();
      const waiting = settle(locks.lock('invoice:1').acquire());
      // The waiter is in: subscribed, its attempts answered, now waiting for the unlock message.
      const channel = (name: string): string => `redisson_lock__channel:{${prefix}${name}}`;
      await waitUntil('the waiter subscribed', async () => (await res.numsub(channel('invoice:1'))) === 1);

      const killedAt = performance.now();
      await kill();
      await waitUntil('redisUnreachable', () => reports.unreachable.length > 0, COMMAND_TIMEOUT_MS + LATE_MS);
      const [first] = reports.unreachable;
      if (first === undefined) throw new Error('no redisUnreachable');
      // Not before commandTimeoutMs without an answer, and about then. The client counts from
      // its oldest call still unanswered, which may have gone out just before the kill (the
      // waiter's attempt once subscribed, slow on a busy machine): at most as long ago as the
      // wait began.
      expect(first.at - waitFrom).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS);
      expect(first.at).toBeGreaterThan(killedAt);
      expect(first.at - killedAt).toBeLessThan(COMMAND_TIMEOUT_MS + LATE_MS);
      expect(first.event.downForMs).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS);
      expect(first.event.error).toBeInstanceOf(Error);
      await waitUntil('the warning', () => warnings.length > 0, 1_000);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.message).toMatch(/^latchkey: Redis has not answered this client for \d+ ms \(/);
      expect(reports.reachable).toEqual([]);

      // Redis is back, empty: the waiter gets the lock, and the client says Redis answers again.
      const restartedAt = performance.now();
      await restart();
      const got = await within(waiting, WAIT_MS, 'the waiter');
      expect(got.error).toBeUndefined();
      expect(reports.reachable.length).toBeGreaterThanOrEqual(1);
      const back = reports.reachable[0];
      expect(back?.at).toBeGreaterThanOrEqual(restartedAt);
      expect(back?.event.downForMs).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS);
      // Once per outage, however many calls failed meanwhile.
      expect(reports.unreachable.filter((report) => report.at < restartedAt)).toHaveLength(1);

      // A second outage is reported by the event again, and by no second warning.
      await holder.lock('invoice:2').acquire({ leaseMs: 60_000 });
      const second = settle(locks.lock('invoice:2').acquire());
      await waitUntil(
        'the second waiter subscribed',
        async () => (await res.numsub(channel('invoice:2'))) === 1,
      );
      const seen = reports.unreachable.length;
      await kill();
      await waitUntil(
        'the second redisUnreachable',
        () => reports.unreachable.length > seen,
        COMMAND_TIMEOUT_MS + LATE_MS,
      );
      await restart();
      expect((await within(second, WAIT_MS, 'the second waiter')).error).toBeUndefined();
      await waitUntil('the second redisReachable', () => reports.reachable.length >= 2, WAIT_MS);
      expect(warnings).toHaveLength(1);
    },
  );

  it('a wait of every kind without waitMs keeps trying through an outage of ten command timeouts, and gets in once Redis is back', async () => {
    const prefix = uniquePrefix('unreachable');
    const locks = await client({ keyPrefix: prefix });
    const reports = reportsOf(locks);
    await Promise.all(WAITABLES.map((kind) => kind.warm(locks, `warm-up:${kind.name}`)));

    await kill();
    const waits = WAITABLES.map((kind) => settle(kind.wait(locks, `report:${kind.name}`, undefined)));
    // Every try of every wait goes unanswered meanwhile, and each is tried again.
    await sleep(10 * COMMAND_TIMEOUT_MS);
    const ended = await Promise.race([Promise.all(waits), sleep(0).then(() => undefined)]);
    expect(ended).toBeUndefined();
    await restart();

    const outcomes = await within(Promise.all(waits), WAIT_MS, 'the waits');
    expect(outcomes.map((outcome, i) => [WAITABLES[i]?.name, outcome.error])).toEqual(
      WAITABLES.map((kind) => [kind.name, undefined]),
    );
    expect(reports.unreachable.length).toBeGreaterThanOrEqual(1);
  });

  describe.each(WAITABLES)('$name', (kind) => {
    it('a wait that starts while Redis is down is reported with its name, and gets in once Redis is back', async () => {
      const prefix = uniquePrefix('unreachable');
      const locks = await client({ keyPrefix: prefix });
      const reports = reportsOf(locks);
      // Past the server check, and no subscriber: only the wait's own calls can tell.
      await kind.warm(locks, 'warm-up');

      const killedAt = performance.now();
      await kill();
      const waiting = settle(kind.wait(locks, 'report:7', WAIT_MS));
      await waitUntil('redisUnreachable', () => reports.unreachable.length > 0, COMMAND_TIMEOUT_MS + LATE_MS);
      const [first] = reports.unreachable;
      expect(first?.event).toMatchObject({ name: 'report:7', key: `${prefix}report:7` });
      expect(first?.event.downForMs).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS);
      expect((first?.at ?? 0) - killedAt).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS);
      expect(warnings).toHaveLength(1);

      await restart();
      const got = await within(waiting, WAIT_MS, `the wait of the ${kind.name}`);
      expect(got.error).toBeUndefined();
      await waitUntil('redisReachable', () => reports.reachable.length > 0, WAIT_MS);
    });
  });
});
