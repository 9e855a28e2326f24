import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockLostError, LockNotOwnedError } from '../../src/index.js';
import { uniquePrefix } from '../support/keys.js';
import { sharedRedis } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';
import { waitUntil, within } from '../support/wait.js';

const EXAMPLE = new URL('../../examples/fenced-writes.ts', import.meta.url).pathname;
// The example starts through tsx, which takes a while on a busy machine, then runs ~1.5 s.
const EXAMPLE_TIMEOUT_MS = 25_000;
const LEASE_MS = 200;

/**
 * The example's own fenced-write script, read from its source so that this test checks the
 * script the example shows rather than a copy that could drift from it.
 */
function exampleScript(): string {
  const source = readFileSync(EXAMPLE, 'utf8');
  const match = /const FENCED_WRITE = `([^`]+)`;/.exec(source);
  if (match?.[1] === undefined) throw new Error(`no FENCED_WRITE script found in ${EXAMPLE}`);
  return match[1];
}

describe('examples/fenced-writes.ts', () => {
  let url: string;
  const res = testResources(() => url);

  beforeAll(async () => {
    ({ url } = await sharedRedis());
  });

  afterEach(() => res.closeAll());

  it(
    "exits 0, reporting the stale write rejected and B's value kept",
    async () => {
      // Under the test prefix, so a least-privilege run's key patterns cover the record too.
      const example = res.worker(EXAMPLE, {
        REDIS_URL: url,
        EXAMPLE_KEY_PREFIX: uniquePrefix('fenced-writes-example'),
      });
      const exit = await within(example.exited, EXAMPLE_TIMEOUT_MS, 'the example');
      const output = example.logs.join('\n');
      const context = `stdout:\n${output}\nstderr:\n${example.stderr}`;
      expect(exit, context).toEqual({ code: 0, signal: null });

      const tookA = /A \(till\)\s+took the lock\s+token (\d+)/.exec(output);
      const tookB = /B \(receiving\)\s+took the lock\s+token (\d+)/.exec(output);
      expect(tookA, context).not.toBeNull();
      expect(tookB, context).not.toBeNull();
      const tokenA = BigInt(tookA?.[1] ?? '0');
      const tokenB = BigInt(tookB?.[1] ?? '0');
      expect(tokenB).toBeGreaterThan(tokenA);

      expect(output).toMatch(/B \(receiving\)\s+wrote 64 units/);
      expect(output).toMatch(new RegExp(`woke up .*writes 37 with token ${tokenA}\\b`));
      expect(output).toMatch(
        new RegExp(
          `A \\(till\\)\\s+stale write rejected\\s+the record has seen token ${tokenB} > ${tokenA}\n`,
        ),
      );
      expect(output).not.toMatch(/write ACCEPTED/);
      expect(output).toContain(`Record: 64 units, written with token ${tokenB}.`);
      expect(output).toMatch(/The stale write was rejected and B's value stands/);
    },
    EXAMPLE_TIMEOUT_MS + 5_000,
  );
});

describe('fencing a store with FencedLock tokens', () => {
  let url: string;
  let admin: Redis;
  const perFile = testResources(() => url);
  const res = testResources(() => url);
  const fencedWrite = exampleScript();

  async function write(
    redis: Redis,
    record: string,
    token: bigint,
    value: string,
  ): Promise<[number, string]> {
    return (await redis.eval(fencedWrite, {
      keys: [record],
      arguments: [token.toString(), value],
    })) as [number, string];
  }

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    admin = await perFile.connect();
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  it('refuses the write of a holder whose lease expired once a later holder has written', async () => {
    const keyPrefix = uniquePrefix('fenced-writes');
    const record = `${keyPrefix}ledger:account-318`;
    const name = 'ledger:account-318:writer';
    const redisA = await res.connectLocks();
    const redisB = await res.connectLocks();
    const locksA = res.track(new LockClient(redisA, { keyPrefix }));
    const locksB = res.track(new LockClient(redisB, { keyPrefix }));
    const lockA = locksA.fencedLock(name);
    const lockB = locksB.fencedLock(name);

    const askedAt = performance.now();
    const leaseA = await lockA.acquire({ leaseMs: LEASE_MS });
    expect(typeof leaseA.token).toBe('bigint');
    expect(await lockA.currentToken()).toBe(leaseA.token);
    // While A holds the lock, its writes go through (also a repeat with the same token).
    expect(await write(admin, record, leaseA.token, '100')).toEqual([1, leaseA.token.toString()]);
    expect(await write(admin, record, leaseA.token, '90')).toEqual([1, leaseA.token.toString()]);

    // A stalls past its lease; B waits for the lock meanwhile and gets it once it expires.
    const leaseB = await lockB.acquire({ waitMs: 10 * LEASE_MS, leaseMs: LEASE_MS });
    // Not before A's lease ran out (Redis and this process read different clocks: a few ms).
    expect(performance.now() - askedAt).toBeGreaterThan(LEASE_MS - 10);
    expect(leaseB.token).toBeGreaterThan(leaseA.token);
    expect(await lockB.currentToken()).toBe(leaseB.token);
    expect(await write(admin, record, leaseB.token, '140')).toEqual([1, leaseB.token.toString()]);

    // A wakes up and sends its late write with its old token: refused, B's value stays.
    expect(await write(admin, record, leaseA.token, '80')).toEqual([0, leaseB.token.toString()]);
    expect(await admin.hGetAll(record)).toEqual({ value: '140', token: leaseB.token.toString() });

    // A's own client has noticed too, though only after the lease ran out: too late to stop a
    // write already past its last check, which is why the store checks the token.
    await waitUntil("A's lease.signal aborted", () => leaseA.signal.aborted, 1_000);
    expect(leaseA.signal.reason).toBeInstanceOf(LockLostError);
    await expect(leaseA.release()).rejects.toBeInstanceOf(LockNotOwnedError);
    await leaseB.release();
    expect(await lockB.isLocked()).toBe(false);
    await admin.del([record, `redisson_lock_token:{${lockA.key}}`]);
  });

  it('compares tokens as 64-bit integers, not as doubles or as text', async () => {
    const record = `${uniquePrefix('fenced-writes')}ledger:account-902`;
    // Past 2^53 these two are the same double; as text, "10" sorts before "9".
    const big = 9_007_199_254_740_993n;
    expect(await write(admin, record, big, 'newer')).toEqual([1, big.toString()]);
    expect(await write(admin, record, big - 1n, 'older')).toEqual([0, big.toString()]);
    expect(await write(admin, record, big + 1n, 'newest')).toEqual([1, (big + 1n).toString()]);
    await admin.del(record);

    const short = `${record}:short`;
    expect(await write(admin, short, 10n, 'ten')).toEqual([1, '10']);
    expect(await write(admin, short, 9n, 'nine')).toEqual([0, '10']);
    expect(await admin.hGet(short, 'value')).toBe('ten');
    await admin.del(short);
  });
});
