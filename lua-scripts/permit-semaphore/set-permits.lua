-- Sets or adds to the free permits of a permit semaphore, once per request, and publishes the new count.
-- KEYS[1] counter: a string holding the number of free permits
-- KEYS[2] timeout set: `{<counter>}:timeout`, permit ids out -> end of their lease
-- KEYS[3] request key: records this request's reply, so a retried copy gets the same reply
-- ARGV[1] channel: `redisson_sc:{<counter>}`
-- ARGV[2] mode: `set` to create the counter at ARGV[3] only if it does not exist (trySetPermits),
--   `add` to add ARGV[3] to it (addPermits; a missing counter counts as ARGV[4], or 0 when ARGV[4] is empty)
-- ARGV[3] permits: the count to set (integer >= 0) or to add (integer, may be negative)
-- ARGV[4] initial permits: the count a missing counter starts from in `add` mode (integer >= 0), or empty
-- ARGV[5] request TTL: how long KEYS[3] keeps the reply, in milliseconds (integer > 0)
-- Returns, in `set` mode, 1 when the counter was created and 0 when it existed already; in `add` mode,
--   the new number of free permits. A retried copy of the same request returns what the first returned.
local counterKey = KEYS[1]
local timeoutKey = KEYS[2]
local requestKey = KEYS[3]
local channel = ARGV[1]
local mode = ARGV[2]
local permits = ARGV[3]
local initialPermits = ARGV[4]
local requestTtl = ARGV[5]

-- @include permit-reclaim

local recorded = redis.call('get', requestKey)
if recorded then
  return tonumber(recorded)
end
local now = permitNowMs()
reclaimExpiredPermits(counterKey, timeoutKey, channel, now)
local reply
if mode == 'set' then
  reply = 0
  if redis.call('set', counterKey, permits, 'nx') then
    reply = 1
    redis.call('publish', channel, permits)
  end
else
  if initialPermits ~= '' then
    redis.call('set', counterKey, initialPermits, 'nx')
  end
  reply = redis.call('incrby', counterKey, permits)
  if reply > 0 then
    redis.call('publish', channel, reply)
  end
end
redis.call('set', requestKey, reply, 'px', requestTtl)
return reply
