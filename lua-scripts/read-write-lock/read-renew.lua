-- Renews many read holds in one call (the watchdog's batch): each reader's lease keys and the hash.
-- KEYS[i] for odd i: lock key of hold (i + 1) / 2; for even i: that hold's lease prefix,
--   `{<lock key>}:<owner>:rwlock_timeout`, for i = 1 .. #KEYS
-- ARGV[1] lease: new lease for every hold still alive, in milliseconds (integer > 0)
-- ARGV[i + 1] for odd i: the owner's reader field of hold (i + 1) / 2; for even i: that lock's
--   channel, `redisson_rwlock:{<lock key>}`
-- Returns an array with one integer per hold: 1 renewed, 0 the owner no longer holds it. A reader
--   whose field is there but every lease key lapsed (it stalled past its lease while other
--   readers kept the hash alive) holds nothing: its field is dropped, and the lock freed with `0`
--   published if no live reader is left.
-- On a read-only replica every answer here fails with READONLY (include/refuse-on-replica.lua),
-- so a client that reached one asks again rather than hear of its hold from a stale node.
local lease = ARGV[1]
local renewed = {}

-- @include read-write-lock
-- @include refuse-on-replica

for i = 1, #KEYS, 2 do
  local lockKey = KEYS[i]
  local leasePrefix = KEYS[i + 1]
  local owner = ARGV[i + 1]
  local channel = ARGV[i + 2]
  local count = tonumber(redis.call('hget', lockKey, owner))
  local alive = false
  if count ~= nil then
    for n = 1, count do
      if redis.call('pexpire', leasePrefix .. ':' .. n, lease) == 1 then
        alive = true
      end
    end
    if alive then
      extendTo(lockKey, lease)
    else
      redis.call('hdel', lockKey, owner)
      afterReaderChange(lockKey, leaseBase(leasePrefix, owner), channel)
    end
  else
    -- From reads alone: on a replica, ask the master instead.
    refuseOnReplica(lockKey)
  end
  renewed[#renewed + 1] = alive and 1 or 0
end
return renewed
