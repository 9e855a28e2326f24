-- Gives back one permit of a permit semaphore by its id, once, and publishes the new count of free permits.
-- KEYS[1] counter: a string holding the number of free permits
-- KEYS[2] timeout set: `{<counter>}:timeout`, permit ids out -> end of their lease (ms since the epoch)
-- KEYS[3] request key: records this release's reply, so a retried copy gets the same reply
-- ARGV[1] channel: `redisson_sc:{<counter>}`
-- ARGV[2] permit id: 32 hex digits (secret)
-- ARGV[3] request TTL: how long KEYS[3] keeps the reply, in milliseconds (integer > 0)
-- Returns 1 when the permit was out under the id and is given back (the new count is published);
--   0 when it was not: its lease had ended (it was given back by whichever script saw it first),
--   it was released already, or the id was never handed out. A retried copy of the same request
--   returns what the first copy returned.
local counterKey = KEYS[1]
local timeoutKey = KEYS[2]
local requestKey = KEYS[3]
local channel = ARGV[1]
local permitId = ARGV[2]
local requestTtl = ARGV[3]

-- @include permit-reclaim

local recorded = redis.call('get', requestKey)
if recorded then
  return tonumber(recorded)
end
local now = permitNowMs()
reclaimExpiredPermits(counterKey, timeoutKey, channel, now)
local released = 0
if redis.call('zrem', timeoutKey, permitMember(permitId)) == 1 then
  local free = redis.call('incrby', counterKey, 1)
  redis.call('publish', channel, free)
  released = 1
end
redis.call('set', requestKey, released, 'px', requestTtl)
return released
