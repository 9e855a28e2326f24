-- Sets a semaphore's count of free permits only if it has none yet, and announces it, once per request.
-- KEYS[1] semaphore key: a string counter of free permits
-- KEYS[2] request key: this request's recorded reply, so a copy of it answers the same
-- ARGV[1] permits: the count to set (integer >= 0)
-- ARGV[2] record TTL: how long KEYS[2] keeps the reply, in milliseconds (integer > 0)
-- ARGV[3] semaphore channel: `redisson_sc:{<key>}`, told the count when it is set
-- Returns 1 when this request set the count, 0 when the counter already existed.
local semaphoreKey = KEYS[1]
local requestKey = KEYS[2]
local permits = ARGV[1]
local recordTtl = ARGV[2]
local channel = ARGV[3]

local recorded = redis.call('get', requestKey)
if recorded then
  return tonumber(recorded)
end
local set = 0
if redis.call('set', semaphoreKey, permits, 'nx') then
  set = 1
  redis.call('publish', channel, permits)
end
redis.call('set', requestKey, set, 'px', recordTtl)
return set
