-- Releases one hold of a reentrant lock; the last hold frees the lock for the next waiter.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] unlock channel: `redisson_lock__channel:{<lock key>}`
-- KEYS[3] request key: remembers for a while that this request freed the lock
-- KEYS[4] wait queue: sorted set of waiters (see include/hand-over.lua)
-- ARGV[1] lease: lease to set on the lock key when holds remain, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 1)
-- ARGV[4] request TTL: how long KEYS[3] is kept, in milliseconds (integer > 0)
-- Returns 0 when holds remain (count is now expected - 1), 1 when the lock was freed: handed to
--   the first live waiter in the queue, or deleted with `0` published on the unlock channel; both
--   also when this same request is replayed after being applied;
--   nil when the owner does not hold the lock at count expected (lost, expired, force-released).
local lockKey = KEYS[1]
local channel = KEYS[2]
local requestKey = KEYS[3]
local queueKey = KEYS[4]
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local requestTtl = tonumber(ARGV[4])

-- @include hand-over

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held == expected and held > 0 then
  if held > 1 then
    redis.call('hincrby', lockKey, owner, -1)
    redis.call('pexpire', lockKey, lease)
    return 0
  end
  redis.call('del', lockKey)
  handOver(lockKey, channel, queueKey)
  redis.call('set', requestKey, 1, 'px', requestTtl)
  return 1
end

-- Replays of a request whose reply was lost: report what it did, never apply it twice.
if held > 0 and held == expected - 1 then
  return 0
end
if held == 0 and expected == 1 and redis.call('exists', requestKey) == 1 then
  return 1
end
return nil
