/**
 * Redisson's RLock, played command for command: its acquire and release scripts and its unlock
 * channel, spelt out here rather than taken from src/ so that a test of latchkey against them
 * checks latchkey, not latchkey against itself.
 */
import type { Redis } from './resources.js';

/** The lease Redisson's watchdog keeps an RLock at (lockWatchdogTimeout, 30 s). */
export const REDISSON_LEASE_MS = 30_000;

/** What Redisson's RLock runs to take a lock (RedissonLock.tryLockInnerAsync). */
const REDISSON_TRY_LOCK = `
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
return redis.call('pttl', KEYS[1]);`;

/** What Redisson's RLock runs to release a lock (RedissonLock.unlockInnerAsync, without the latch). */
const REDISSON_UNLOCK = `
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call('publish', KEYS[2], ARGV[1]);
  return 1;
end;`;

/** Redisson's unlock channel of an RLock: `redisson_lock__channel:{<key>}`. */
export function redissonChannel(key: string): string {
  return key.includes('{') ? `redisson_lock__channel:${key}` : `redisson_lock__channel:{${key}}`;
}

/** Redisson's tryLock for the owner `field` (`<uuid>:<threadId>`): null when taken, else the PTTL. */
export function redissonTryLock(redis: Redis, key: string, field: string): Promise<unknown> {
  return redis.sendCommand(['EVAL', REDISSON_TRY_LOCK, '1', key, String(REDISSON_LEASE_MS), field]);
}

/** Redisson's unlock for the owner `field`: 1 when freed (DEL + PUBLISH 0), 0 when holds remain, null when not held. */
export function redissonUnlock(redis: Redis, key: string, field: string): Promise<unknown> {
  return redis.sendCommand([
    'EVAL',
    REDISSON_UNLOCK,
    '2',
    key,
    redissonChannel(key),
    '0',
    String(REDISSON_LEASE_MS),
    field,
  ]);
}
