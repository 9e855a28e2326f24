-- Drops every hold of one owner of a fair lock that has given it up for lost, waking the head if that frees it.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] queue: list of waiting owner fields in arrival order, `redisson_lock_queue:{<lock key>}`
-- KEYS[3] timeouts: sorted set owner field -> absolute deadline in ms (Redis's clock)
-- KEYS[4] heartbeats: sorted set owner field -> heartbeat deadline of a latchkey waiter in ms
--   (Redis's clock), `{<lock key>}:latchkey_heartbeats`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`; the head hears `0` on
--   `<unlock channel>:<owner field of the head>`
-- ARGV[2] owner: hash field of the owner that lost the lock
-- Every call first drops the queue's heads whose deadline or heartbeat deadline has passed (by Redis's TIME). When
-- removing the field empties the hash (Redis deletes it), `0` is published to the head, if any.
-- Returns 1 when the owner's field was there and is removed, 0 when it was already gone.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local timeoutKey = KEYS[3]
local heartbeatKey = KEYS[4]
local channel = ARGV[1]
local owner = ARGV[2]

-- @include fair-queue

dropStaleHeads(queueKey, timeoutKey, heartbeatKey, redisNowMs())
if redis.call('hdel', lockKey, owner) == 0 then
  return 0
end
if redis.call('exists', lockKey) == 0 then
  wakeHead(queueKey, channel)
end
return 1
