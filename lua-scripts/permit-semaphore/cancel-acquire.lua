-- Gives up a permit-semaphore acquire whose outcome is unknown: refuses any late replay, undoes it if applied.
-- KEYS[1] counter: a string holding the number of free permits
-- KEYS[2] request key of the acquire request being given up
-- KEYS[3] timeout set: `{<counter>}:timeout`, permit ids out -> end of their lease (ms since the epoch)
-- ARGV[1] channel: `redisson_sc:{<counter>}`
-- ARGV[2] permit id: the id the request carried (secret)
-- ARGV[3] request TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- Returns 1 when the request had been applied and its permit is given back, 0 when it had not been applied
--   (or its permit's lease had ended and it was given back already).
local counterKey = KEYS[1]
local requestKey = KEYS[2]
local timeoutKey = KEYS[3]
local channel = ARGV[1]
local permitId = ARGV[2]
local requestTtl = ARGV[3]

-- @include permit-reclaim

redis.call('set', requestKey, '1', 'px', requestTtl)
local now = permitNowMs()
reclaimExpiredPermits(counterKey, timeoutKey, channel, now)
if redis.call('zrem', timeoutKey, permitMember(permitId)) == 0 then
  return 0
end
local free = redis.call('incrby', counterKey, 1)
redis.call('publish', channel, free)
return 1
