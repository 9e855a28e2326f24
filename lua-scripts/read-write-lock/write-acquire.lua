-- Takes or re-enters a write lock for one owner (Redisson RWriteLock layout); a waiting writer registers.
-- KEYS[1] lock key: hash with `mode`, reader fields `<owner> -> count`, writer field `<owner>:write`
-- KEYS[2] request key: exists only when write-cancel-acquire.lua gave this request up
-- KEYS[3] waiting writers: zset `<writer field> -> ms since the epoch (Redis TIME) it lapses at`
-- ARGV[1] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- ARGV[2] writer: the owner's writer field, `<clientId>:<ownerId>:write`
-- ARGV[3] reader: the same owner's reader field, `<clientId>:<ownerId>`
-- ARGV[4] expected: write hold count the caller believes the owner has before this call (integer >= 0)
-- ARGV[5] writer timeout: how long a waiting writer's entry in KEYS[3] lives unless it asks again,
--   in milliseconds (integer > 0); KEYS[3] itself lives that long after the last entry joined
-- ARGV[6] waiting: `1` when the caller will wait if the lock is held (it then registers in KEYS[3])
-- Returns nil when the owner now holds the write lock at count expected + 1 (taken, re-entered, or
--   a replay of this same request that was applied; the hash's PTTL is at least the lease, never
--   lease + PTTL; the owner's entry in KEYS[3] is removed);
--   {pttl, 0} when another owner holds the lock (its PTTL in ms, -1: no expiry); a waiting caller
--   is now in KEYS[3], lapsing ARGV[5] ms from now;
--   -3 when the request was cancelled (KEYS[2] exists) and would take the lock: nothing changed;
--   -4 when the owner's write count is neither expected nor expected + 1 (its hold was lost);
--   -5 when the owner holds the read lock and not the write lock: an upgrade, refused (it would
--   wait for itself); nothing changed.
-- On a read-only replica the answer -4, like every answer that writes, fails with READONLY
-- (include/refuse-on-replica.lua): a client that reached one asks again rather than hear its
-- hold was lost from a stale node.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local writersKey = KEYS[3]
-- Numbers handed on to Redis stay the caller's text: Redis would format Lua numbers with sprintf.
local lease = ARGV[1]
local writer = ARGV[2]
local reader = ARGV[3]
local expected = tonumber(ARGV[4])
local writerTimeout = ARGV[5]
local waiting = ARGV[6] == '1'

-- @include read-write-lock
-- @include refuse-on-replica

local held = tonumber(redis.call('hget', lockKey, writer)) or 0
if held == expected + 1 then
  -- The reply to this request was lost and the caller asks again: it holds the lock.
  extendTo(lockKey, lease)
  redis.call('zrem', writersKey, writer)
  return nil
end
if held ~= expected then
  -- From reads alone: on a replica, ask the master instead.
  refuseOnReplica(lockKey)
  return -4
end
if held == 0 and redis.call('hexists', lockKey, reader) == 1 then
  return -5
end

local mode = redis.call('hget', lockKey, 'mode')
if mode == false or held > 0 then
  if redis.call('exists', requestKey) == 1 then
    return -3
  end
  if mode == false then
    redis.call('hset', lockKey, 'mode', 'write', writer, '1')
    redis.call('pexpire', lockKey, lease)
  else
    redis.call('hincrby', lockKey, writer, '1')
    extendTo(lockKey, lease)
  end
  redis.call('zrem', writersKey, writer)
  return nil
end

if waiting then
  local lapsesAt = redisNowMs() + tonumber(writerTimeout)
  redis.call('zadd', writersKey, string.format('%d', lapsesAt), writer)
  redis.call('pexpire', writersKey, writerTimeout)
end
return { redis.call('pttl', lockKey), 0 }
