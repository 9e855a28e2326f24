-- Takes or re-enters a fair lock for one owner in queue order, or queues the owner and keeps its place.
-- KEYS[1] lock key: hash of owner field -> hold count; its PTTL is the lease
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- KEYS[3] queue: list of waiting owner fields in arrival order, `redisson_lock_queue:{<lock key>}`
-- KEYS[4] timeouts: sorted set owner field -> absolute deadline (ms since the epoch, Redis's
--   clock) at which the owner loses its place, in RFairLock's arithmetic, `redisson_lock_timeout:{<lock key>}`
-- KEYS[5] heartbeats: sorted set owner field -> absolute deadline (ms, Redis's clock) at which a
--   latchkey waiter that stopped calling loses its place, `{<lock key>}:latchkey_heartbeats`
-- ARGV[1] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 0)
-- ARGV[4] waiting: `1` when the caller may wait, so a busy lock queues the owner (or keeps its
--   place); empty: a single try, which never queues
-- ARGV[5] waiter timeout: how long a queued owner keeps its place after each call unless it calls
--   again, in milliseconds (integer > 0); its heartbeat deadline becomes Redis's now + this
-- ARGV[6] wait step: Redisson's threadWaitTime (`fairLockWaitTimeout`), in milliseconds (integer > 0)
-- Every call first drops the queue's heads whose deadline or heartbeat deadline has passed (by
-- Redis's TIME).
-- Returns nil when the owner now holds the lock at count expected + 1 (taken because the lock was
--   free and the queue empty or headed by the owner: then every waiter's deadline moves one wait
--   step earlier, as RFairLock's acquire does; re-entered; or a replay of this same request that
--   had already been applied): the lease is set and the owner is out of the queue;
--   {wait} when the owner may not take the lock now: wait is the lock's PTTL in milliseconds (-1:
--   no expiry), or, when the lock is free but another owner heads the queue, the milliseconds until
--   that head's deadline or heartbeat deadline, whichever is first (when it could be dropped); when
--   waiting, the owner is then queued once, at the back if it was not queued, with RFairLock's
--   deadline (the last waiter's deadline, or now + the lock's PTTL, plus one wait step), its
--   heartbeat deadline set to now + ARGV[5], and its deadline raised, if need be, to now + ARGV[5]
--   + one wait step per waiter ahead of it (every waiter behind it moving on by as much), so that
--   those ahead can all take the lock or leave before its next call without its place lapsing;
--   -3 when the request was cancelled (KEYS[2] exists) and would take or re-enter the lock:
--   nothing is changed;
--   -4 when the owner's hold count is neither expected nor expected + 1 (its hold was lost).
-- On a read-only replica the answer -4, like every answer that writes, fails with READONLY
-- (include/refuse-on-replica.lua): a client that reached one asks again rather than hear its
-- hold was lost from a stale node.
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local queueKey = KEYS[3]
local timeoutKey = KEYS[4]
local heartbeatKey = KEYS[5]
-- Numbers handed on to Redis stay the caller's text: Redis would format Lua numbers with sprintf.
local lease = ARGV[1]
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local waiting = ARGV[4] == '1'
local waiterTimeout = tonumber(ARGV[5])
local step = tonumber(ARGV[6])

-- @include fair-queue
-- @include refuse-on-replica

local now = redisNowMs()
dropStaleHeads(queueKey, timeoutKey, heartbeatKey, now)

local function takeOutOfQueue()
  redis.call('lrem', queueKey, '0', owner)
  redis.call('zrem', timeoutKey, owner)
  redis.call('zrem', heartbeatKey, owner)
end

local pttl = redis.call('pttl', lockKey)
local held = 0
if pttl ~= -2 then
  held = tonumber(redis.call('hget', lockKey, owner)) or 0
end

if held == expected + 1 then
  -- The reply to this request was lost and the caller is asking again: it holds the lock.
  redis.call('pexpire', lockKey, lease)
  takeOutOfQueue()
  return nil
end
if held ~= expected then
  -- From reads alone: on a replica, ask the master instead.
  refuseOnReplica(lockKey)
  return -4
end

local head = redis.call('lindex', queueKey, 0)
if held > 0 or (pttl == -2 and (not head or head == owner)) then
  -- Taking a free lock or re-entering: only here can a late copy of a cancelled request do harm.
  if redis.call('exists', requestKey) == 1 then
    return -3
  end
  redis.call('hincrby', lockKey, owner, '1')
  redis.call('pexpire', lockKey, lease)
  takeOutOfQueue()
  if held == 0 then
    -- Everyone waiting moves up one place: one wait step less to wait, as RFairLock counts it.
    moveAllDeadlines(timeoutKey, -step)
  end
  return nil
end

local wait = pttl
if pttl == -2 then
  -- Free, but an earlier owner is next: it could be dropped once its deadline passes.
  local lapses = tonumber(redis.call('zscore', timeoutKey, head))
  local beat = tonumber(redis.call('zscore', heartbeatKey, head))
  if beat ~= nil and beat < lapses then
    lapses = beat
  end
  wait = lapses - now
end

if waiting then
  local place = redis.call('lpos', queueKey, owner)
  local deadline = tonumber(redis.call('zscore', timeoutKey, owner))
  if not place or deadline == nil then
    -- Joining: RFairLock's deadline, the last waiter's (or the lock's expiry) plus one step.
    local last = redis.call('lindex', queueKey, -1)
    local lastDeadline = nil
    if last and last ~= owner then
      lastDeadline = tonumber(redis.call('zscore', timeoutKey, last))
    end
    if lastDeadline ~= nil then
      deadline = lastDeadline + step
    else
      deadline = now + pttl + step
    end
    redis.call('zadd', timeoutKey, asText(deadline), owner)
    if not place then
      place = redis.call('rpush', queueKey, owner) - 1
    end
  end
  -- A live waiter never loses its place: each call moves its heartbeat deadline on, and keeps
  -- its deadline at least one step per waiter ahead (each may take the lock or leave, moving it
  -- one step earlier) beyond the next call. Raising it moves everyone behind on by as much, so
  -- their deadlines keep the steps RFairLock counted for them.
  redis.call('zadd', heartbeatKey, asText(now + waiterTimeout), owner)
  local floor = now + waiterTimeout + place * step
  if deadline < floor then
    redis.call('zadd', timeoutKey, asText(floor), owner)
    shiftDeadlines(queueKey, timeoutKey, place + 1, floor - deadline)
  end
  -- All three live until the latest deadline in them plus one waiter timeout, then go on their
  -- own once nobody waits; never shortened here.
  local latest = redis.call('zrange', timeoutKey, '-1', '-1', 'withscores')
  local keep = waiterTimeout
  if latest[2] ~= nil then
    keep = math.max(tonumber(latest[2]) - now, 0) + waiterTimeout
  end
  for _, key in ipairs({ queueKey, timeoutKey, heartbeatKey }) do
    if redis.call('pttl', key) < keep then
      redis.call('pexpire', key, asText(keep))
    end
  end
end
return { wait }
