-- Takes or re-enters a read lock for one owner (Redisson RReadLock layout), with writer preference.
-- KEYS[1] lock key: hash with `mode`, reader fields `<owner> -> count`, writer field `<owner>:write`
-- KEYS[2] request key: exists only when read-cancel-acquire.lua gave this request up
-- KEYS[3] lease prefix: `{<lock key>}:<owner>:rwlock_timeout`; hold n's lease key is `<prefix>:<n>`
-- KEYS[4] waiting writers: zset `<writer field> -> ms since the epoch (Redis TIME) it lapses at`
-- ARGV[1] lease: lease of this hold's lease key, in milliseconds (integer > 0)
-- ARGV[2] owner: the owner's reader field, `<clientId>:<ownerId>`
-- ARGV[3] writer field: the same owner's writer field, `<owner>:write`
-- ARGV[4] expected: read hold count the caller believes the owner has before this call (integer >= 0)
-- Returns nil when the owner now holds the read lock at count expected + 1 (taken, re-entered,
--   taken beside its own write lock, or a replay of this same request that was applied);
--   {pttl, 0} when it must wait: a writer holds the lock (the hash's PTTL, -1: no expiry), or the
--   owner holds nothing here and a writer waits (writer preference; the time until the hash
--   expires or the first waiting writer lapses, whichever is sooner);
--   -3 when the request was cancelled (KEYS[2] exists) and would take the lock: nothing changed;
--   -4 when the owner's read count is neither expected nor expected + 1 (its hold was lost).
-- On a read-only replica the answer -4, like every answer that writes, fails with READONLY
-- (include/refuse-on-replica.lua): a client that reached one asks again rather than hear its
-- hold was lost from a stale node.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local leasePrefix = KEYS[3]
local writersKey = KEYS[4]
-- Numbers handed on to Redis stay the caller's text: Redis would format Lua numbers with sprintf.
local lease = ARGV[1]
local owner = ARGV[2]
local writer = ARGV[3]
local expected = tonumber(ARGV[4])

-- @include read-write-lock
-- @include refuse-on-replica

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held == expected + 1 then
  -- The reply to this request was lost and the caller asks again: it holds the lock.
  redis.call('pexpire', leasePrefix .. ':' .. held, lease)
  extendTo(lockKey, lease)
  return nil
end
if held ~= expected then
  -- From reads alone: on a replica, ask the master instead.
  refuseOnReplica(lockKey)
  return -4
end

local mode = redis.call('hget', lockKey, 'mode')
local isWriter = redis.call('hexists', lockKey, writer) == 1
if mode == false or mode == 'read' or isWriter then
  if held == 0 and not isWriter then
    -- Writer preference: a new reader waits while a live writer waits. Re-entering readers and a
    -- downgrading writer go on, or the writer would wait for them and they for it.
    local now = redisNowMs()
    redis.call('zremrangebyscore', writersKey, '-inf', string.format('%d', now))
    local first = redis.call('zrange', writersKey, 0, 0, 'withscores')
    if first[2] ~= nil then
      local wait = math.max(1, tonumber(first[2]) - now)
      local pttl = redis.call('pttl', lockKey)
      if pttl > 0 and pttl < wait then
        wait = pttl
      end
      return { wait, 0 }
    end
  end
  if redis.call('exists', requestKey) == 1 then
    return -3
  end
  if mode == false then
    redis.call('hset', lockKey, 'mode', 'read')
  end
  local n = redis.call('hincrby', lockKey, owner, '1')
  redis.call('set', leasePrefix .. ':' .. n, '1', 'px', lease)
  extendTo(lockKey, lease)
  return nil
end
return { redis.call('pttl', lockKey), 0 }
