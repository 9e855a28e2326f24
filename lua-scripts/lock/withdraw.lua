-- Takes a waiter that gave up out of the wait queue, passing the lock on if it was handed to it.
-- KEYS[1] lock key
-- KEYS[2] unlock channel: `redisson_lock__channel:{<lock key>}`
-- KEYS[3] wait queue: sorted set of waiters (see include/hand-over.lua)
-- ARGV[1] owner: hash field of the waiter's owner
-- ARGV[2] waiter: the waiter's queue member
-- ARGV[3] handed: `1` when the owner holds nothing but what a hand-over to this waiter gave it
-- Returns 0 when the waiter was still queued or gone, 1 when the lock had been handed to it and
--   is now passed on to the next waiter (or announced free).
local lockKey = KEYS[1]
local channel = KEYS[2]
local queueKey = KEYS[3]
local owner = ARGV[1]
local waiter = ARGV[2]
local handed = ARGV[3] == '1'

-- @include hand-over

if redis.call('zrem', queueKey, waiter) == 1 or not handed then
  return 0
end
if redis.call('hget', lockKey, owner) ~= '1' then
  return 0
end
redis.call('hdel', lockKey, owner)
if redis.call('exists', lockKey) == 0 then
  handOver(lockKey, channel, queueKey)
end
return 1
