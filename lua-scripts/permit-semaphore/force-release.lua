-- Gives back every permit out of a permit semaphore, whoever holds it, and publishes the new count of free permits.
-- KEYS[1] counter: a string holding the number of free permits
-- KEYS[2] timeout set: `{<counter>}:timeout`, permit ids out -> end of their lease
-- ARGV[1] channel: `redisson_sc:{<counter>}`
-- Returns 1 when permits were out and are given back, 0 when none was out.
local counterKey = KEYS[1]
local timeoutKey = KEYS[2]
local channel = ARGV[1]

local out = redis.call('zcard', timeoutKey)
if out == 0 then
  return 0
end
redis.call('del', timeoutKey)
local free = redis.call('incrby', counterKey, out)
redis.call('publish', channel, free)
return 1
