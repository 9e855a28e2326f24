-- Takes permits of a semaphore if enough are free; records the outcome so a copy of the request changes nothing.
-- KEYS[1] semaphore key: a string counter of free permits (Redisson's RSemaphore), no TTL
-- KEYS[2] request key: the recorded outcome of this request, `<status> <free>`, or `cancelled`
-- ARGV[1] permits: how many permits to take (integer >= 1)
-- ARGV[2] initial permits: the count to create the counter with when it is missing (integer >= 0);
--   empty: a missing counter means 0 free permits and is left missing
-- ARGV[3] record TTL: how long KEYS[2] keeps the outcome, in milliseconds (integer > 0)
-- ARGV[4] semaphore channel: `redisson_sc:{<key>}`, told the count when this call creates the counter
-- Returns {1, free} when the permits were taken (free: the permits left);
--   {0, free} when too few are free (free: the permits free now; 0 when the counter is missing);
--   the recorded reply again when this request was already applied;
--   {-3, 0} when the request was given up by cancel-acquire.lua: nothing is changed.
local semaphoreKey = KEYS[1]
local requestKey = KEYS[2]
local permits = ARGV[1]
local initial = ARGV[2]
local recordTtl = ARGV[3]
local channel = ARGV[4]

local recorded = redis.call('get', requestKey)
if recorded == 'cancelled' then
  return {-3, 0}
end
if recorded then
  local status, free = string.match(recorded, '^(-?%d+) (-?%d+)$')
  return {tonumber(status), tonumber(free)}
end

local value = redis.call('get', semaphoreKey)
local created = false
if value == false and initial ~= '' then
  redis.call('set', semaphoreKey, initial, 'nx')
  value = initial
  created = true
end
local free = tonumber(value or '0')
if free >= tonumber(permits) then
  local left = redis.call('decrby', semaphoreKey, permits)
  redis.call('set', requestKey, '1 ' .. left, 'px', recordTtl)
  -- Waiters of clients that know no initial count sleep on a missing counter: tell them.
  if created and left > 0 then
    redis.call('publish', channel, left)
  end
  return {1, left}
end
if created and free > 0 then
  redis.call('publish', channel, value)
end
-- A late copy of this request must not take permits once the caller has moved on.
redis.call('set', requestKey, '0 ' .. free, 'px', recordTtl)
return {0, free}
