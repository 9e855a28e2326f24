-- Drops every read hold of one owner that gave its lock up for lost, so no stale hold lingers.
-- KEYS[1] lock key
-- KEYS[2] lease prefix: `{<lock key>}:<owner>:rwlock_timeout`
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- ARGV[2] owner: the owner's reader field
-- Returns 1 when the owner's field was there and is removed (with its lease keys; the lock is
--   freed with `0` published if no live hold is left), 0 when it was already gone.
local lockKey = KEYS[1]
local leasePrefix = KEYS[2]
local channel = ARGV[1]
local owner = ARGV[2]

-- @include read-write-lock

local count = tonumber(redis.call('hget', lockKey, owner))
if count == nil then
  return 0
end
for n = 1, count do
  redis.call('del', leasePrefix .. ':' .. n)
end
redis.call('hdel', lockKey, owner)
afterReaderChange(lockKey, leaseBase(leasePrefix, owner), channel)
return 1
