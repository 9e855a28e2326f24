-- Drops every write hold of one owner that gave its lock up for lost, so no stale hold lingers.
-- KEYS[1] lock key
-- ARGV[1] channel: `redisson_rwlock:{<lock key>}`
-- ARGV[2] writer: the owner's writer field
-- Returns 1 when the writer field was there and is removed (the lock is deleted, or left in read
--   mode for the owner's read holds, and `1` published), 0 when it was already gone.
local lockKey = KEYS[1]
local channel = ARGV[1]
local writer = ARGV[2]

-- @include read-write-lock

if redis.call('hdel', lockKey, writer) == 0 then
  return 0
end
afterWriterLeft(lockKey, channel)
return 1
