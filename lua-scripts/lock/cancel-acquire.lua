-- Gives up an acquire request whose outcome is unknown: refuses any late replay, undoes it if applied.
-- KEYS[1] lock key
-- KEYS[2] unlock channel: `redisson_lock__channel:{<lock key>}`
-- KEYS[3] request key of the acquire request being given up
-- KEYS[4] wait queue: sorted set of waiters (see include/hand-over.lua)
-- ARGV[1] owner: hash field of the owner that sent the request
-- ARGV[2] expected: the `expected` the request carried (hold count before it, integer >= 0)
-- ARGV[3] request TTL: how long KEYS[3] refuses the request, in milliseconds (integer > 0)
-- ARGV[4] waiter: the queue member the request carried, removed from the queue; empty: none
-- Returns 1 when the request had been applied and is now undone, 0 when it had not been applied.
local lockKey = KEYS[1]
local channel = KEYS[2]
local requestKey = KEYS[3]
local queueKey = KEYS[4]
local owner = ARGV[1]
local expected = tonumber(ARGV[2])
local requestTtl = tonumber(ARGV[3])
local waiter = ARGV[4]

-- @include hand-over

redis.call('set', requestKey, 1, 'px', requestTtl)
if waiter ~= '' then
  redis.call('zrem', queueKey, waiter)
end

local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held ~= expected + 1 then
  return 0
end
if held > 1 then
  redis.call('hincrby', lockKey, owner, -1)
else
  redis.call('del', lockKey)
  handOver(lockKey, channel, queueKey)
end
return 1
