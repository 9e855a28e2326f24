-- Takes a reentrant lock for one owner, or re-enters it (Redisson RLock layout); queues a waiter.
-- KEYS[1] lock key: hash of owner field -> hold count; its PTTL is the lease
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- KEYS[3] wait queue: sorted set of waiters, scored by arrival (see include/hand-over.lua)
-- ARGV[1] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 0)
-- ARGV[4] waiter: queue member to add when the lock is held by another owner, `<ticket> <lease>
--   <grant channel> <owner>`; empty: do not queue
-- ARGV[5] queued: `1` when ARGV[4] may already be queued (remove it once the lock is taken)
-- ARGV[6] queue TTL: how long the queue outlives the holder's lease, in milliseconds (integer > 0)
-- Returns nil when the owner now holds the lock at count expected + 1 (taken, re-entered, handed
--   over by a release, or a replay of this same request that had already been applied; the lease
--   is set either way);
--   an integer >= -1 when another owner holds the lock: its PTTL in milliseconds (-1: no expiry);
--   the waiter, if given, is then queued;
--   -3 when the request was cancelled (KEYS[2] exists): nothing is changed;
--   -4 when the owner's hold count is neither expected nor expected + 1 (its hold was lost).
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local queueKey = KEYS[3]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local waiter = ARGV[4]
local queued = ARGV[5] == '1'
local queueTtl = tonumber(ARGV[6])

if redis.call('exists', requestKey) == 1 then
  return -3
end

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held == expected + 1 then
  -- Handed over to this owner while it waited, or the reply to this request was lost and the
  -- caller is asking again: either way it holds the lock now.
  redis.call('pexpire', lockKey, lease)
  if queued then
    redis.call('zrem', queueKey, waiter)
  end
  return nil
end
if held ~= expected then
  return -4
end
if held == 0 then
  local pttl = redis.call('pttl', lockKey)
  if pttl ~= -2 then
    if waiter ~= '' then
      local now = redis.call('time')
      redis.call('zadd', queueKey, 'NX', now[1] * 1000000 + now[2], waiter)
      -- The queue outlives the current holder's lease; every waiter's attempt extends it.
      local keep = math.max(pttl, 0) + queueTtl
      if redis.call('pttl', queueKey) < keep then
        redis.call('pexpire', queueKey, keep)
      end
    end
    return pttl
  end
end

redis.call('hincrby', lockKey, owner, 1)
redis.call('pexpire', lockKey, lease)
if queued then
  redis.call('zrem', queueKey, waiter)
end
return nil
