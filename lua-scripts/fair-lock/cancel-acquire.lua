-- Gives up a fair lock's acquire request whose outcome is unknown: refuses any late replay, undoes it if applied.
-- KEYS[1] lock key: hash of owner field -> hold count
-- KEYS[2] request key of the acquire request being given up
-- KEYS[3] queue: list of waiting owner fields in arrival order, `redisson_lock_queue:{<lock key>}`
-- KEYS[4] timeouts: sorted set owner field -> absolute deadline in ms (Redis's clock)
-- KEYS[5] heartbeats: sorted set owner field -> heartbeat deadline of a latchkey waiter in ms
--   (Redis's clock), `{<lock key>}:latchkey_heartbeats`
-- ARGV[1] unlock channel: `redisson_lock__channel:{<lock key>}`; the head hears `0` on
--   `<unlock channel>:<owner field of the head>`
-- ARGV[2] owner: hash field of the owner that sent the request
-- ARGV[3] expected: the `expected` the request carried (hold count before it, integer >= 0)
-- ARGV[4] request TTL: how long KEYS[2] refuses the request, in milliseconds (integer > 0)
-- ARGV[5] wait step: Redisson's threadWaitTime (`fairLockWaitTimeout`), in milliseconds (integer > 0)
-- Every call first drops the queue's heads whose deadline or heartbeat deadline has passed (by
-- Redis's TIME). KEYS[2] is set; the owner is taken out of the queue, the timeouts and the
-- heartbeats, the deadlines behind it moving one wait step earlier (a waiter of the same owner
-- still waiting queues again on its next call); a hold the request made is given back; a lock
-- freed that way, or a free lock whose head the owner was, wakes the new head.
-- Returns 1 when the request had been applied and is now undone, 0 when it had not been applied.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local queueKey = KEYS[3]
local timeoutKey = KEYS[4]
local heartbeatKey = KEYS[5]
local channel = ARGV[1]
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local requestTtl = ARGV[4]
local step = tonumber(ARGV[5])

-- @include fair-queue

local now = redisNowMs()
dropStaleHeads(queueKey, timeoutKey, heartbeatKey, now)
redis.call('set', requestKey, '1', 'px', requestTtl)
leaveQueue(lockKey, queueKey, timeoutKey, heartbeatKey, channel, owner, now, step)
local held = tonumber(redis.call('hget', lockKey, owner)) or 0
if held ~= expected + 1 then
  return 0
end
if held > 1 then
  redis.call('hincrby', lockKey, owner, '-1')
  return 1
end
redis.call('del', lockKey)
wakeHead(queueKey, channel)
return 1
