-- Deletes a fair lock whoever holds it, and wakes the owner at the queue's head.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] queue: list of waiting owner fields in arrival order, `redisson_lock_queue:{<lock key>}`
-- KEYS[3] timeouts: sorted set owner field -> absolute deadline in ms (Redis's clock)
-- KEYS[4] heartbeats: sorted set owner field -> heartbeat deadline of a latchkey waiter in ms
--   (Redis's clock), `{<lock key>}:latchkey_heartbeats`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`; the head hears `0` on
--   `<unlock channel>:<owner field of the head>`
-- Every call first drops the queue's heads whose deadline or heartbeat deadline has passed (by Redis's TIME). The queue
-- is kept otherwise: its waiters keep their places. After the delete, `0` is published to the
-- head, if any.
-- Returns 1 when a lock was deleted, 0 when the key did not exist.
local lockKey = KEYS[1]
local queueKey = KEYS[2]
local timeoutKey = KEYS[3]
local heartbeatKey = KEYS[4]
local channel = ARGV[1]

-- @include fair-queue

dropStaleHeads(queueKey, timeoutKey, heartbeatKey, redisNowMs())
if redis.call('del', lockKey) == 0 then
  return 0
end
wakeHead(queueKey, channel)
return 1
