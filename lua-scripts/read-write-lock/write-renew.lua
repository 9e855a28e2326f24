-- Renews the leases of many write holds in one call (the watchdog's batch).
-- KEYS[i] lock key of the i-th hold, for i = 1 .. #KEYS
-- ARGV[1] lease: lease every lock still held keeps at least, in milliseconds (integer > 0)
-- ARGV[i + 1] writer: the writer field of the i-th hold's owner
-- Returns an array with one integer per key: 1 renewed, 0 the owner no longer holds that lock.
-- On a read-only replica the answer 0 fails with READONLY (include/refuse-on-replica.lua), so a
-- client that reached one asks again rather than hear of its hold from a stale node.
local lease = ARGV[1]
local renewed = {}

-- @include read-write-lock
-- @include refuse-on-replica

for i = 1, #KEYS do
  local lockKey = KEYS[i]
  local writer = ARGV[i + 1]
  if redis.call('hexists', lockKey, writer) == 1 then
    extendTo(lockKey, lease)
    renewed[i] = 1
  else
    -- From reads alone: on a replica, ask the master instead.
    refuseOnReplica(lockKey)
    renewed[i] = 0
  end
end
return renewed
