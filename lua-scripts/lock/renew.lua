-- Renews the leases of many held locks in one call (the watchdog's batch).
-- KEYS[i] lock key of the i-th hold, for i = 1 .. #KEYS
-- ARGV[1] lease: new lease for every lock still held, in milliseconds (integer > 0)
-- ARGV[i + 1] owner: hash field of the owner of the i-th hold
-- Returns an array with one integer per key: 1 renewed, 0 the owner no longer holds that lock.
-- Handed on to Redis as the caller's text: Redis would format a Lua number with sprintf.
-- On a read-only replica every answer here fails with READONLY (include/refuse-on-replica.lua),
-- so a client that reached one asks again rather than hear of its hold from a stale node.
local lease = ARGV[1]
local renewed = {}

-- @include refuse-on-replica

for i = 1, #KEYS do
  local lockKey = KEYS[i]
  local owner = ARGV[i + 1]
  if redis.call('hexists', lockKey, owner) == 1 then
    redis.call('pexpire', lockKey, lease)
    renewed[i] = 1
  else
    -- From reads alone: on a replica, ask the master instead.
    refuseOnReplica(lockKey)
    renewed[i] = 0
  end
end
return renewed
