-- Gives up a write acquire whose outcome is unknown: refuses any late replay, undoes it if applied.
-- KEYS[1] lock key
-- KEYS[2] request key of the acquire request being given up
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- ARGV[2] writer: the owner's writer field
-- ARGV[3] expected: the `expected` the request carried (write count before it, integer >= 0)
-- ARGV[4] request TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- Returns 1 when the request had been applied and is now undone (a freed lock publishes `1`), 0
--   when it had not been applied.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local channel = ARGV[1]
local writer = ARGV[2]
local expected = tonumber(ARGV[3])
local requestTtl = ARGV[4]

-- @include read-write-lock

redis.call('set', requestKey, '1', 'px', requestTtl)
local held = tonumber(redis.call('hget', lockKey, writer)) or 0
if held ~= expected + 1 then
  return 0
end
if held > 1 then
  redis.call('hincrby', lockKey, writer, '-1')
else
  redis.call('hdel', lockKey, writer)
  afterWriterLeft(lockKey, channel)
end
return 1
