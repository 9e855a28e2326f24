-- Renews the leases of many permits in one call (the watchdog's batch), after giving back expired ones.
-- KEYS[2i - 1] counter of the i-th hold's semaphore, KEYS[2i] its timeout set `{<counter>}:timeout`, for i = 1 .. #KEYS / 2
-- ARGV[1] lease: new lease of every permit still out, in milliseconds from now (integer > 0)
-- ARGV[2i] channel of the i-th hold's semaphore: `redisson_sc:{<counter>}`
-- ARGV[2i + 1] permit id of the i-th hold: 32 hex digits (secret)
-- Returns an array with one integer per hold: 1 renewed, 0 the permit is no longer out under that id
--   (its lease ended and it was given back, or it was released by id or force-released).
-- On a read-only replica every answer here fails with READONLY
-- (include/refuse-on-replica-zset.lua), so a client that reached one asks again rather than hear
-- of its permit from a stale node.
local lease = tonumber(ARGV[1])

-- @include permit-reclaim
-- @include refuse-on-replica-zset

local now = permitNowMs()
local renewed = {}
for i = 1, #KEYS / 2 do
  local counterKey = KEYS[2 * i - 1]
  local timeoutKey = KEYS[2 * i]
  reclaimExpiredPermits(counterKey, timeoutKey, ARGV[2 * i], now)
  local member = permitMember(ARGV[2 * i + 1])
  if redis.call('zscore', timeoutKey, member) then
    redis.call('zadd', timeoutKey, 'xx', permitMs(now + lease), member)
    renewed[i] = 1
  else
    -- From reads alone: on a replica, ask the master instead.
    refuseOnReplicaZset(timeoutKey)
    renewed[i] = 0
  end
end
return renewed
