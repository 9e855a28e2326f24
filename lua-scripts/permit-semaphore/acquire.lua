-- Takes one permit of a permit semaphore under a permit id, with a lease that ends unless renewed.
-- KEYS[1] counter: a string holding the number of free permits (no TTL: the semaphore's state)
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- KEYS[3] timeout set: `{<counter>}:timeout`, permit ids out -> end of their lease (ms since the epoch, Redis's clock)
-- ARGV[1] channel: `redisson_sc:{<counter>}`, where the count of free permits is published when
--   expired permits come back, and when this call creates the counter and leaves permits free
-- ARGV[2] permit id: 32 hex digits, new for this acquisition (secret)
-- ARGV[3] lease: how long the permit is held unless renewed, in milliseconds (integer > 0)
-- ARGV[4] initial permits: the count the counter is created with when it does not exist (integer >= 0),
--   or empty to leave a missing counter missing (no permits)
-- Returns nil when the permit is held under the id (taken now, or a replay of this request that had
--   been applied: its lease is set again);
--   the milliseconds until the earliest lease of the permits out ends (>= 1), or -1 when none will
--   end, when no permit is free;
--   -3 when the request was cancelled (KEYS[2] exists): nothing is changed.
local counterKey = KEYS[1]
local requestKey = KEYS[2]
local timeoutKey = KEYS[3]
local channel = ARGV[1]
local permitId = ARGV[2]
local lease = tonumber(ARGV[3])
local initialPermits = ARGV[4]

-- @include permit-reclaim

local now = permitNowMs()
local member = permitMember(permitId)
reclaimExpiredPermits(counterKey, timeoutKey, channel, now)

if redis.call('zscore', timeoutKey, member) then
  redis.call('zadd', timeoutKey, permitMs(now + lease), member)
  return nil
end
if redis.call('exists', requestKey) == 1 then
  return -3
end
local created = createCounter(counterKey, initialPermits)
local free = tonumber(redis.call('get', counterKey)) or 0
if free >= 1 then
  local left = redis.call('decrby', counterKey, 1)
  redis.call('zadd', timeoutKey, permitMs(now + lease), member)
  if created and left > 0 then
    redis.call('publish', channel, left)
  end
  return nil
end
return untilEarliestExpiry(timeoutKey, now)
