/**
 * Faults of a multi-lock's process, each against a redis-server of its own, with the faulty
 * process a real Node process (test/support/fixtures/multi-lock-worker.ts):
 *   - the holder of a multi-lease frozen (SIGSTOP) for three leases: a multi-lock listing the same
 *     locks in the opposite order takes every member once the frozen holder's leases ran out; the
 *     thawed holder's multi-lease signal aborts with a member's LockLostError by its own clock,
 *     and its release is refused and leaves the new holder's locks alone;
 *   - a process killed (SIGKILL) while its multi-lock waits for a member, holding the members
 *     before it: nothing it took outlives its lease, and nothing after the awaited member is
 *     held at all.
 * Bounds are leases plus generous slack: the machine may be busy. Times are monotonic stamps,
 * comparable across the processes of the machine.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/index.js';
import type { Worker } from '../support/child.js';
import { uniquePrefix } from '../support/keys.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { msBetween, now, ofType, stamp } from '../support/stamps.js';
import { sleep, waitUntil } from '../support/wait.js';
import { scaled } from './scale.js';

const WORKER = new URL('../support/fixtures/multi-lock-worker.ts', import.meta.url).pathname;
const LEASE_MS = scaled(1_000, 1_500);
const RENEW_MS = LEASE_MS / 3;
/** How late past a lease a takeover or an expiry may be seen on a busy two-core machine. */
const SLACK_MS = 3_000;
// Child processes start through tsx, which on a busy machine takes more than 20 s. Not a timing
// under test: only a bound on a hung start.
const STARTUP_MS = 60_000;
const MS = 1_000_000n;

function budget(scenarioMs: number): number {
  return 2 * STARTUP_MS + scenarioMs;
}

async function sleepUntil(at: bigint): Promise<void> {
  const left = at - now();
  if (left > 0n) await sleep(Number(left / MS) + 1);
}

describe('faults of a multi-lock holder process', () => {
  let server: RedisInstance;
  let observer: Redis;
  const res = testResources(() => server.url);

  beforeEach(async () => {
    server = await startRedis();
    observer = await res.connect();
  });

  afterEach(async () => {
    await res.closeAll();
    // Unset when beforeEach could not start a server; its own error says why.
    await server?.stop();
  });

  async function spawn(keyPrefix: string, names: string): Promise<Worker> {
    const worker = res.worker(WORKER, {
      REDIS_URL: server.url,
      KEY_PREFIX: keyPrefix,
      NAMES: names,
      WATCHDOG_MS: String(LEASE_MS),
    });
    await worker.next(ofType('ready'), STARTUP_MS);
    return worker;
  }

  /** Every hash entry of `keys`, owners included: to compare, never to print. */
  async function contents(keys: readonly string[]): Promise<string> {
    const all = await Promise.all(keys.map((key) => observer.hGetAll(key)));
    return JSON.stringify(all);
  }

  it(
    'frozen (SIGSTOP) for three leases: the other order takes over, the thawed holder aborts and its release is refused',
    async () => {
      const keyPrefix = uniquePrefix('multi-stop');
      const holder = await spawn(keyPrefix, 'ledger:a,ledger:b,ledger:c');
      holder.send({ type: 'acquire' });
      const held = await holder.next(ofType('acquired'), 10_000);
      const keys = held['keys'] as string[];
      expect(keys).toHaveLength(3);

      const locks = res.track(
        new LockClient(await res.connectLocks(), { keyPrefix, watchdogTimeoutMs: 30_000 }),
      );
      const multi = locks.multiLock(['ledger:c', 'ledger:b', 'ledger:a'].map((name) => locks.lock(name)));
      let takenAt: bigint | undefined;
      const taking = multi.acquire({ waitMs: 10 * LEASE_MS + SLACK_MS }).then((lease) => {
        takenAt = now();
        return lease;
      });
      // A renewal or two go by: the holder's watchdog keeps every member meanwhile.
      await sleep(LEASE_MS + RENEW_MS);
      expect(takenAt).toBeUndefined();
      expect(await observer.exists(keys)).toBe(3);

      const pauseFrom = now();
      holder.kill('SIGSTOP');
      const lease = await taking;
      const takeoverMs = msBetween(pauseFrom, takenAt ?? now());
      // Within the frozen holder's lease (renewed at most a lease ago) and the slack of a busy machine.
      expect(takeoverMs).toBeLessThanOrEqual(LEASE_MS + SLACK_MS);
      expect(lease.leases.map((member) => member.key)).toEqual([...keys].reverse());
      const atTakeover = await contents(keys);

      await sleepUntil(pauseFrom + BigInt(3 * LEASE_MS) * MS);
      expect(holder.messages.filter(ofType('abort'))).toHaveLength(0);
      const resumedAt = now();
      holder.kill('SIGCONT');
      // Its own clock says the leases ran out: the multi-lease's signal aborts at once.
      const abort = await holder.next(ofType('abort'), 5_000);
      expect(abort['reason']).toBe('expired');
      expect(msBetween(resumedAt, stamp(abort))).toBeLessThanOrEqual(RENEW_MS + SLACK_MS);

      holder.send({ type: 'release' });
      const released = await holder.next(ofType('release-result'), 5_000);
      expect(released['ok']).toBe(false);
      expect(released['code']).toBe('NOT_OWNER');
      expect(await contents(keys)).toBe(atTakeover);
      expect(lease.signal.aborted).toBe(false);
      await lease.release();
      expect(await observer.exists(keys)).toBe(0);
    },
    budget(10 * LEASE_MS + SLACK_MS),
  );

  it(
    'killed (SIGKILL) while waiting for a member: what it took expires within its lease, nothing after it is held',
    async () => {
      const keyPrefix = uniquePrefix('multi-kill');
      const locks = res.track(
        new LockClient(await res.connectLocks(), { keyPrefix, watchdogTimeoutMs: 30_000 }),
      );
      const blocker = await locks.lock('dock:b').acquire();
      const [first, last] = [locks.lock('dock:a').key, locks.lock('dock:c').key];

      const waiter = await spawn(keyPrefix, 'dock:c,dock:b,dock:a');
      waiter.send({ type: 'acquire' });
      await waiter.next(ofType('waiting'), 10_000);
      // It holds dock:a (before dock:b by key) while it waits for dock:b, and not dock:c.
      await waitUntil(
        'the waiting process holds dock:a',
        async () => (await observer.exists(first)) === 1,
        10_000,
      );
      // Held across renewals: its watchdog keeps what it took while it waits.
      await sleep(LEASE_MS + RENEW_MS);
      expect(await observer.exists(first)).toBe(1);
      expect(await observer.exists(last)).toBe(0);

      const killedFrom = now();
      waiter.kill('SIGKILL');
      expect(await waiter.exited).toEqual({ code: null, signal: 'SIGKILL' });
      await waitUntil(
        'dock:a expired',
        async () => (await observer.exists(first)) === 0,
        LEASE_MS + SLACK_MS,
      );
      // Its last renewal was at most a lease before the kill ended it.
      expect(msBetween(killedFrom, now())).toBeLessThanOrEqual(LEASE_MS + SLACK_MS);
      expect(await observer.exists(last)).toBe(0);
      expect(waiter.messages.filter(ofType('acquired'))).toHaveLength(0);

      // Every member is free for the taking again once the blocker lets go.
      await blocker.release();
      const lease = await locks
        .multiLock(['dock:a', 'dock:b', 'dock:c'].map((name) => locks.lock(name)))
        .acquire({ waitMs: 5_000 });
      expect(await observer.exists(lease.leases.map((member) => member.key))).toBe(3);
      await lease.release();
    },
    budget(4 * LEASE_MS + 2 * SLACK_MS),
  );
});
