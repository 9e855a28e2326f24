/**
 * Wire compatibility of the read-write lock with Redisson's RReadWriteLock: a Java service's
 * read and write locks, played here command for command by the scripts Redisson runs, share one
 * lock with latchkey's — mutual exclusion both ways, readers of both side by side, and each
 * side's releases waking the other's waiters on `redisson_rwlock:{<key>}`.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Redis } from '../support/resources.js';
import { sharedSuite } from '../support/shared-suite.js';
import { sleep, waitUntil, within } from '../support/wait.js';

/**
 * RedissonReadLock.tryLockInnerAsync. KEYS: lock, the reader's lease-key prefix; ARGV: lease,
 * reader field, writer field.
 */
const REDISSON_READ_LOCK = `
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
  redis.call('hset', KEYS[1], 'mode', 'read');
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('set', KEYS[2] .. ':1', 1);
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1);
  local key = KEYS[2] .. ':' .. ind;
  redis.call('set', key, 1);
  redis.call('pexpire', key, ARGV[1]);
  local remainTime = redis.call('pttl', KEYS[1]);
  redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1]));
  return nil;
end;
return redis.call('pttl', KEYS[1]);`;

/**
 * RedissonReadLock.unlockInnerAsync. KEYS: lock, channel, the reader's lease-key prefix, the
 * lease keys' common prefix, the unlock latch; ARGV: message `0`, reader field, publish command,
 * latch TTL.
 */
const REDISSON_READ_UNLOCK = `
local val = redis.call('get', KEYS[5]);
if val ~= false then
  return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
  redis.call(ARGV[3], KEYS[2], ARGV[1]);
  redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
  return 1;
end;
local lockExists = redis.call('hexists', KEYS[1], ARGV[2]);
if (lockExists == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
if (counter == 0) then
  redis.call('hdel', KEYS[1], ARGV[2]);
end;
redis.call('del', KEYS[3] .. ':' .. (counter+1));
if (redis.call('hlen', KEYS[1]) > 1) then
  local maxRemainTime = -3;
  local keys = redis.call('hkeys', KEYS[1]);
  for n, key in ipairs(keys) do
    counter = tonumber(redis.call('hget', KEYS[1], key));
    if type(counter) == 'number' then
      for i=counter, 1, -1 do
        local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i);
        maxRemainTime = math.max(remainTime, maxRemainTime);
      end;
    end;
  end;
  if maxRemainTime > 0 then
    redis.call('pexpire', KEYS[1], maxRemainTime);
    redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
    return 0;
  end;
  if mode == 'write' then
    redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
    return 0;
  end;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[3], KEYS[2], ARGV[1]);
redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
return 1;`;

/** RedissonWriteLock.tryLockInnerAsync. KEYS: lock; ARGV: lease, writer field. */
const REDISSON_WRITE_LOCK = `
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
  redis.call('hset', KEYS[1], 'mode', 'write');
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if (mode == 'write') then
  if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    local currentExpire = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]);
    return nil;
  end;
end;
return redis.call('pttl', KEYS[1]);`;

/**
 * RedissonWriteLock.unlockInnerAsync. KEYS: lock, channel, the unlock latch; ARGV: message `1`,
 * lease, writer field, publish command, latch TTL.
 */
const REDISSON_WRITE_UNLOCK = `
local val = redis.call('get', KEYS[3]);
if val ~= false then
  return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
  redis.call(ARGV[4], KEYS[2], ARGV[1]);
  redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
  return 1;
end;
if (mode == 'write') then
  local lockExists = redis.call('hexists', KEYS[1], ARGV[3]);
  if (lockExists == 0) then
    return nil;
  else
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
    if (counter > 0) then
      redis.call('pexpire', KEYS[1], ARGV[2]);
      redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
      return 0;
    else
      redis.call('hdel', KEYS[1], ARGV[3]);
      if (redis.call('hlen', KEYS[1]) == 1) then
        redis.call('del', KEYS[1]);
        redis.call(ARGV[4], KEYS[2], ARGV[1]);
      else
        redis.call('hset', KEYS[1], 'mode', 'read');
      end;
      redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
      return 1;
    end;
  end;
end;
return nil;`;

const REDISSON_LEASE_MS = 30_000;
const LATCH_TTL_MS = 5_000;

/** Names as Redisson builds them for a key without a hash tag, spelt out here. */
const channelOf = (key: string): string => `redisson_rwlock:{${key}}`;

/** A Redisson thread's lock: `<uuid>:<threadId>`, its reader and writer fields and lease keys. */
class JavaThread {
  readonly field = `${randomUUID()}:1`;
  constructor(
    private readonly java: Redis,
    private readonly key: string,
  ) {}

  private eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return this.java.sendCommand(['EVAL', script, String(keys.length), ...keys, ...args]);
  }

  /** null when taken, else the PTTL Redisson would wait for. */
  readLock(): Promise<unknown> {
    return this.eval(
      REDISSON_READ_LOCK,
      [this.key, `{${this.key}}:${this.field}:rwlock_timeout`],
      [String(REDISSON_LEASE_MS), this.field, `${this.field}:write`],
    );
  }

  readUnlock(): Promise<unknown> {
    return this.eval(
      REDISSON_READ_UNLOCK,
      [
        this.key,
        channelOf(this.key),
        `{${this.key}}:${this.field}:rwlock_timeout`,
        `{${this.key}}`,
        `redisson_unlock_latch:{${this.key}}:${randomUUID()}`,
      ],
      ['0', this.field, 'publish', String(LATCH_TTL_MS)],
    );
  }

  writeLock(): Promise<unknown> {
    return this.eval(REDISSON_WRITE_LOCK, [this.key], [String(REDISSON_LEASE_MS), `${this.field}:write`]);
  }

  writeUnlock(): Promise<unknown> {
    return this.eval(
      REDISSON_WRITE_UNLOCK,
      [this.key, channelOf(this.key), `redisson_unlock_latch:{${this.key}}:${randomUUID()}`],
      ['1', String(REDISSON_LEASE_MS), `${this.field}:write`, 'publish', String(LATCH_TTL_MS)],
    );
  }
}

describe('read-write lock wire compatibility with Redisson RReadWriteLock', () => {
  const suite = sharedSuite('rw-wire');
  const { res, lockClient } = suite;

  async function subscribe(channel: string): Promise<string[]> {
    const subscriber = await res.connect();
    const messages: string[] = [];
    await subscriber.subscribe(channel, (message) => messages.push(message));
    return messages;
  }

  it("a Redisson writer blocks latchkey's readers and writers, and its release (`1`) wakes them all", async () => {
    const rw = lockClient().readWriteLock('catalog');
    const java = new JavaThread(suite.admin, rw.key);
    expect(await java.writeLock()).toBeNull();

    expect(await rw.readLock().tryAcquire({ waitMs: 150 })).toBeNull();
    expect(await rw.writeLock().tryAcquire({ waitMs: 150 })).toBeNull();
    const readers = [rw.readLock().acquire({ waitMs: 20_000 }), rw.readLock().acquire({ waitMs: 20_000 })];
    await waitUntil('the readers listen', async () => (await res.numsub(channelOf(rw.key))) >= 1);
    await sleep(200);
    const releasedAt = performance.now();
    expect(await java.writeUnlock()).toBe(1);
    const leases = await within(Promise.all(readers), 2_000, 'the woken readers');
    // Far sooner than the 30 s Redisson lease the readers would otherwise wait out.
    expect(performance.now() - releasedAt).toBeLessThan(2_000);
    expect(Object.keys(await suite.admin.hGetAll(rw.key))).toHaveLength(3);
    await Promise.all(leases.map((lease) => lease.release()));
    expect(await suite.admin.exists(rw.key)).toBe(0);
  });

  it("a latchkey writer blocks Redisson's readers and writers, and its release publishes `1` for them", async () => {
    const rw = lockClient().readWriteLock('ledger');
    const java = new JavaThread(suite.admin, rw.key);
    const messages = await subscribe(channelOf(rw.key));
    const writer = await rw.writeLock().acquire();

    expect(Number(await java.readLock())).toBeGreaterThan(0);
    expect(Number(await java.writeLock())).toBeGreaterThan(0);
    await writer.release();
    await waitUntil('the release was published', () => messages.length === 1);
    expect(messages).toEqual(['1']);
    expect(await java.readLock()).toBeNull();
    expect(await java.readUnlock()).toBe(1);
  });

  it('Redisson readers and latchkey readers share the lock, each side reading the other’s lease keys', async () => {
    const rw = lockClient({ watchdogTimeoutMs: 4_000 }).readWriteLock('prices');
    const java = new JavaThread(suite.admin, rw.key);
    const messages = await subscribe(channelOf(rw.key));

    expect(await java.readLock()).toBeNull();
    const mine = await rw.readLock().acquire({ waitMs: 0 });
    expect(Number(await java.writeLock())).toBeGreaterThan(0);
    expect(await rw.writeLock().tryAcquire()).toBeNull();

    // latchkey's reader leaves first: the hash then lives as long as Redisson's lease key.
    await mine.release();
    expect(await suite.admin.hGet(rw.key, 'mode')).toBe('read');
    expect(await suite.admin.pTTL(rw.key)).toBeGreaterThan(REDISSON_LEASE_MS - 5_000);

    // Again, the other way round: Redisson's unlock finds latchkey's lease key by its name and
    // sets the hash's PTTL to it, as it does for its own readers.
    const again = await rw.readLock().acquire({ waitMs: 0 });
    expect(await java.readUnlock()).toBe(0);
    const pttl = await suite.admin.pTTL(rw.key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(4_000);
    expect(messages).toEqual([]);
    await again.release();
    await waitUntil('the last reader published', () => messages.length === 1);
    expect(messages).toEqual(['0']);
    expect(await suite.admin.keys(`{${rw.key}}:*`)).toEqual([]);
  });

  it("Redisson's last reader leaving (`0`) wakes a latchkey writer; latchkey's last reader wakes Redisson's writer", async () => {
    const rw = lockClient().readWriteLock('stock');
    const java = new JavaThread(suite.admin, rw.key);
    expect(await java.readLock()).toBeNull();
    const writing = rw.writeLock().acquire({ waitMs: 20_000 });
    await waitUntil('the writer listens', async () => (await res.numsub(channelOf(rw.key))) >= 1);
    await sleep(200);
    const releasedAt = performance.now();
    expect(await java.readUnlock()).toBe(1);
    const writer = await within(writing, 2_000, 'the woken writer');
    expect(performance.now() - releasedAt).toBeLessThan(2_000);
    await writer.release();

    const messages = await subscribe(channelOf(rw.key));
    const reader = await rw.readLock().acquire();
    expect(Number(await java.writeLock())).toBeGreaterThan(0);
    await reader.release();
    await waitUntil('the free was published', () => messages.length === 1);
    expect(messages).toEqual(['0']);
    expect(await java.writeLock()).toBeNull();
    expect(await java.writeUnlock()).toBe(1);
  });
});
