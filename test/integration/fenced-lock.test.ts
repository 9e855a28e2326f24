/**
 * The fenced lock: a reentrant lock whose every acquisition gets a token from
 * `redisson_lock_token:{<key>}` that is larger than every token before it — re-entries,
 * hand-overs and takeovers after a loss included — and a Redisson RFencedLock client sharing the
 * same keys.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { FencedLease, Lease, LockLostError, LockNotOwnedError } from '../../src/index.js';
import { luaScripts } from '../../src/scripts/generated.js';
import { commandsFrom } from '../support/monitor.js';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle, sleep, waitUntil } from '../support/wait.js';

/** What Redisson's RFencedLock runs to take a lock and get a token (tryLockInnerAsync). */
const REDISSON_FENCED_TRY_LOCK = `
if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  local token = redis.call('incr', KEYS[2]);
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return {-1, token};
end;
return {redis.call('pttl', KEYS[1]), -1};`;

const REDISSON_LEASE_MS = 30_000;

/** The token counter's name, spelt out as Redisson's RFencedLock names it. */
function tokenKeyOf(key: string): string {
  return `redisson_lock_token:{${key}}`;
}

describe('FencedLock', () => {
  const suite = sharedSuite('fenced');
  const { res, lockClient } = suite;
  let admin: Redis;
  beforeAll(() => {
    admin = suite.admin;
  });

  it('gives every acquisition a larger token, re-entries included, and keeps the counter without a TTL', async () => {
    const locks = lockClient();
    const lock = locks.fencedLock('ledger:7');
    expect(await lock.currentToken()).toBeNull();

    const tokens: bigint[] = [];
    await lock.withLock(async (outer) => {
      expect(outer).toBeInstanceOf(FencedLease);
      expect(outer).toBeInstanceOf(Lease);
      expect(typeof outer.token).toBe('bigint');
      tokens.push(outer.token);
      await lock.withLock(async (inner) => {
        tokens.push(inner.token);
        expect(inner.holdCount).toBe(2);
        expect(await lock.holdCount()).toBe(2);
      });
    });
    const other = await lockClient().fencedLock('ledger:7').acquire();
    tokens.push(other.token);
    await other.release();

    expect(tokens).toEqual([1n, 2n, 3n]);
    expect(await lock.currentToken()).toBe(3n);
    expect(await admin.get(tokenKeyOf(lock.key))).toBe('3');
    expect(await admin.pTTL(tokenKeyOf(lock.key))).toBe(-1);
    expect(await admin.exists(lock.key)).toBe(0);
  });

  it('holds in the RLock hash layout: one owner field with the hold count, PTTL the lease', async () => {
    const lock = lockClient({ watchdogTimeoutMs: 5_000 }).fencedLock('ledger:8');
    const lease = await lock.acquire();
    expect(await admin.type(lock.key)).toBe('hash');
    expect(Object.values(await admin.hGetAll(lock.key))).toEqual(['1']);
    expect(await admin.pTTL(lock.key)).toBeGreaterThan(4_000);
    expect(await lock.tryAcquire()).toBeNull();
    await lease.release();
    expect(await lock.isLocked()).toBe(false);
  });

  it('hands the lock to a waiting client with a new token in the grant, and to the next after a waiter that left', async () => {
    const lock = lockClient().fencedLock('ledger:9');
    const first = await lock.acquire();
    const leaving = new AbortController();
    const gaveUp = settle(lockClient().fencedLock('ledger:9').acquire({ signal: leaving.signal }));
    const queue = `latchkey_queue:{${lock.key}}`;
    await waitUntil('the first waiter is queued', async () => (await admin.lLen(queue)) === 1);
    const waiting = lockClient().fencedLock('ledger:9').acquire({ waitMs: 10_000 });
    await waitUntil('both waiters are queued', async () => (await admin.lLen(queue)) === 2);
    leaving.abort(new Error('the caller went away'));
    expect((await gaveUp).error).toMatchObject({ message: 'the caller went away' });

    await first.release();
    const second = await waiting;
    expect(second.token).toBeGreaterThan(first.token);
    // Whatever path the lock took (hand-over, withdrawal, retry), the holder's token is the
    // latest one issued: nobody issued a larger one to anyone else.
    expect(second.token).toBe(await lock.currentToken());
    await second.release();
    expect(await admin.lLen(queue)).toBe(0);
  });

  it('a hand-over names the new token in its grant, and the waiter holds by it without asking again', async () => {
    const monitor = await res.monitor();
    const lock = lockClient().fencedLock('ledger:13');
    const first = await lock.acquire();
    const waiting = lockClient().fencedLock('ledger:13').acquire({ waitMs: 10_000 });
    await waitUntil(
      'the waiter is queued',
      async () => (await admin.lLen(`latchkey_queue:{${lock.key}}`)) === 1,
    );
    // Scripts sent for this lock, by SHA-1 (a first call may go as EVAL, after NOSCRIPT).
    const byName = new Map<string, string>(
      Object.values(luaScripts).flatMap((script): Array<[string, string]> => [
        [script.sha1, script.sha1],
        [script.source, script.sha1],
      ]),
    );
    const scriptsFor = (lines: readonly string[]): string[] =>
      commandsFrom(lines, { excludeLua: true })
        .filter((command) => /^EVAL(SHA)?$/i.test(command[0] ?? '') && command.includes(lock.key))
        .map((command) => byName.get(command[1] ?? '') ?? '');
    const releaseSha = luaScripts['fenced-lock/release'].sha1;
    // The waiter's queueing attempt, seen before the release goes out.
    const queue = `latchkey_queue:{${lock.key}}`;
    await monitor.waitFor((lines) => lines.some((line) => line.includes('"rpush"') && line.includes(queue)));
    const linesBefore = monitor.lines.length;
    await first.release();
    const second = await waiting;
    expect(second.token).toBe(first.token + 1n);
    await monitor.waitFor((lines) => scriptsFor(lines.slice(linesBefore)).includes(releaseSha));
    const grants = commandsFrom(monitor.lines)
      .filter(
        (command) => command[0]?.toLowerCase() === 'publish' && command[1]?.startsWith('latchkey_grant:'),
      )
      .map((command) => command[2] ?? '');
    expect(grants.some((message) => message.endsWith(` ${second.token}`))).toBe(true);
    // The release was the only script sent for this lock since: the grant was used as it came.
    await sleep(20);
    expect(scriptsFor(monitor.lines.slice(linesBefore)).filter((sha) => sha !== releaseSha)).toEqual([]);
    await second.release();
  });

  it('a holder that lost its lock keeps its old token; the next holder gets a larger one', async () => {
    const lock = lockClient().fencedLock('ledger:10');
    const stale = await lock.acquire({ leaseMs: 150 });
    await waitUntil('the stale lease is lost', () => stale.signal.aborted, 2_000);
    expect(stale.signal.reason).toBeInstanceOf(LockLostError);
    const fresh = await lockClient().fencedLock('ledger:10').acquire();
    expect(fresh.token).toBeGreaterThan(stale.token);
    expect((await settle(stale.release())).error).toBeInstanceOf(LockNotOwnedError);
    await fresh.release();
  });

  it('a hand-over from a plain lock on the same key still gives the fenced waiter a token', async () => {
    const plain = lockClient().lock('ledger:14');
    const held = await plain.acquire();
    const fenced = lockClient().fencedLock('ledger:14');
    const waiting = fenced.acquire({ waitMs: 10_000 });
    await waitUntil(
      'the fenced waiter is queued',
      async () => (await admin.lLen(`latchkey_queue:{${plain.key}}`)) === 1,
    );
    // The plain lock's release hands over with a grant that names no token.
    await held.release();
    const lease = await waiting;
    expect(lease.token).toBeGreaterThanOrEqual(1n);
    expect(lease.token).toBe(await fenced.currentToken());
    expect(Object.values(await admin.hGetAll(plain.key))).toEqual(['1']);
    await lease.release();
    expect(await admin.exists(plain.key)).toBe(0);
  });

  it('never goes back, not even after forceUnlock', async () => {
    const lock = lockClient().fencedLock('ledger:11');
    const before = await lock.acquire();
    expect(await lock.forceUnlock()).toBe(true);
    expect(before.signal.aborted).toBe(true);
    const after = await lock.acquire();
    expect(after.token).toBeGreaterThan(before.token);
    await after.release();
  });

  describe('with a Redisson RFencedLock on the same keys', () => {
    const javaField = `${randomUUID()}:1`;

    async function javaTryLock(key: string): Promise<[number, number]> {
      const reply: unknown = await admin.sendCommand([
        'EVAL',
        REDISSON_FENCED_TRY_LOCK,
        '2',
        key,
        tokenKeyOf(key),
        String(REDISSON_LEASE_MS),
        javaField,
      ]);
      if (!Array.isArray(reply)) throw new Error(`unexpected reply ${String(reply)}`);
      return [Number(reply[0]), Number(reply[1])];
    }

    it("excludes each other both ways, each side's release lets the other in, and tokens keep growing", async () => {
      const lock = lockClient().fencedLock('ledger:12');
      const [held, javaToken] = await javaTryLock(lock.key);
      expect(held).toBe(-1);
      expect(await lock.tryAcquire()).toBeNull();

      const waiting = lock.acquire({ waitMs: 10_000 });
      await sleep(50);
      // Redisson's unlock at count 0: DEL + PUBLISH 0 on the lock's channel.
      await admin.del(lock.key);
      await admin.publish(`redisson_lock__channel:{${lock.key}}`, '0');
      const lease = await waiting;
      expect(lease.token).toBeGreaterThan(BigInt(javaToken));

      const [pttl, refused] = await javaTryLock(lock.key);
      expect(pttl).toBeGreaterThan(0);
      expect(refused).toBe(-1);
      await lease.release();
      const [heldAgain, laterToken] = await javaTryLock(lock.key);
      expect(heldAgain).toBe(-1);
      expect(BigInt(laterToken)).toBeGreaterThan(lease.token);
      await admin.del(lock.key);
    });
  });
});
