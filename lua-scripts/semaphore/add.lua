-- Adds permits to a semaphore (a release, or addPermits with any sign) and announces the new count, once per request.
-- KEYS[1] semaphore key: a string counter of free permits; created when missing, as Redisson's release does
-- KEYS[2] request key: the count this request left, recorded so a copy of it adds nothing
-- ARGV[1] permits: how many permits to add (integer; negative takes them away)
-- ARGV[2] record TTL: how long KEYS[2] keeps the count, in milliseconds (integer > 0)
-- ARGV[3] semaphore channel: `redisson_sc:{<key>}`, told the new count (Redisson's message)
-- Returns the count of free permits this request left (the recorded one for a copy of it).
local semaphoreKey = KEYS[1]
local requestKey = KEYS[2]
local permits = ARGV[1]
local recordTtl = ARGV[2]
local channel = ARGV[3]

local recorded = redis.call('get', requestKey)
if recorded then
  return tonumber(recorded)
end
local count = redis.call('incrby', semaphoreKey, permits)
redis.call('set', requestKey, count, 'px', recordTtl)
redis.call('publish', channel, count)
return count
