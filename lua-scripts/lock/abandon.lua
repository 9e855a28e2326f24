-- Drops every hold of one owner that has given its lock up for lost, so no stale hold lingers.
-- KEYS[1] lock key
-- KEYS[2] unlock channel: `redisson_lock__channel:{<lock key>}`
-- ARGV[1] owner: hash field of the owner that lost the lock
-- Returns 1 when the owner's field was there and is removed, 0 when it was already gone.
local lockKey = KEYS[1]
local channel = KEYS[2]
local owner = ARGV[1]

if redis.call('hdel', lockKey, owner) == 1 then
  -- An emptied hash is deleted by Redis itself; waiters must hear about it.
  if redis.call('exists', lockKey) == 0 then
    redis.call('publish', channel, 0)
  end
  return 1
end
return 0
