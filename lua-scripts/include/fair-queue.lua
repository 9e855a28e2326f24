-- The fair lock's queue of waiting owners, as Redisson's RFairLock keeps it: a list of owner fields
-- in arrival order, and a sorted set of the same fields scored by the absolute time (ms since the
-- epoch, by Redis's clock) at which each loses its place. The scores follow RFairLock's arithmetic,
-- so that both libraries agree on them: a waiter joins with the deadline of the waiter before it
-- (or, first in line, the lock's PTTL from now) plus one wait step (Redisson's threadWaitTime, its
-- `fairLockWaitTimeout`, 5 minutes by default); an owner that takes the lock moves every waiter's
-- deadline one step earlier, and one that gives up waiting moves those behind it one step earlier.
-- latchkey's waiters also keep a heartbeat deadline of their own (now + their waiter timeout, in a
-- sorted set Redisson does not read), which every call moves on; a waiter that stops calling (dead
-- or frozen) loses its place once it heads the line with that deadline passed, long before its
-- step would run out. A waiter's place is only taken from it at the head: a head whose time has
-- come is dropped, by every script, before it looks at the queue, as Redisson's scripts do.

-- Now by Redis's clock, in whole milliseconds since the epoch.
local function redisNowMs()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A number computed here, as the decimal text Redis is given (never an exponent form).
local function asText(number)
  return string.format('%d', number)
end

-- Drops every head whose place lapsed at `now`: its deadline passed, or a heartbeat deadline it
-- has passed. A head with no deadline at all is dropped too: nobody keeps it alive, so it would
-- hold the line up forever. The deadlines of those behind stay as they are, as in Redisson.
local function dropStaleHeads(queueKey, timeoutKey, heartbeatKey, now)
  while true do
    local head = redis.call('lindex', queueKey, 0)
    if not head then
      return
    end
    local deadline = tonumber(redis.call('zscore', timeoutKey, head))
    local beat = tonumber(redis.call('zscore', heartbeatKey, head))
    if deadline ~= nil and deadline > now and (beat == nil or beat > now) then
      return
    end
    redis.call('zrem', timeoutKey, head)
    redis.call('zrem', heartbeatKey, head)
    redis.call('lpop', queueKey)
  end
end

-- Moves the deadline of every waiter from (0-based) place `from` to the back by `delta` ms.
local function shiftDeadlines(queueKey, timeoutKey, from, delta)
  local index = from
  while true do
    local member = redis.call('lindex', queueKey, index)
    if not member then
      return
    end
    local deadline = tonumber(redis.call('zscore', timeoutKey, member))
    if deadline ~= nil then
      redis.call('zadd', timeoutKey, asText(deadline + delta), member)
    end
    index = index + 1
  end
end

-- Moves every deadline by `delta` ms, as RFairLock's acquire does when it takes the lock.
local function moveAllDeadlines(timeoutKey, delta)
  local entries = redis.call('zrange', timeoutKey, '0', '-1', 'withscores')
  for i = 1, #entries, 2 do
    redis.call('zadd', timeoutKey, asText(tonumber(entries[i + 1]) + delta), entries[i])
  end
end

-- Tells the owner at the head, alone, that the lock is free: `0` on its own channel
-- `<unlock channel>:<owner field>`. Returns 1 when there was a head, 0 when the queue is empty.
local function wakeHead(queueKey, channel)
  local head = redis.call('lindex', queueKey, 0)
  if not head then
    return 0
  end
  redis.call('publish', channel .. ':' .. head, '0')
  return 1
end

-- Takes `owner` out of the queue and its deadlines, moving the deadlines of those behind it one
-- `step` earlier (as Redisson's acquireFailed does); a free lock whose head this was is then
-- announced to the new head, after dropping heads whose place lapsed at `now`. Returns 1 when the
-- owner was queued.
local function leaveQueue(lockKey, queueKey, timeoutKey, heartbeatKey, channel, owner, now, step)
  local place = redis.call('lpos', queueKey, owner)
  if place then
    shiftDeadlines(queueKey, timeoutKey, place + 1, -step)
  end
  redis.call('lrem', queueKey, '0', owner)
  redis.call('zrem', timeoutKey, owner)
  redis.call('zrem', heartbeatKey, owner)
  if place == 0 and redis.call('exists', lockKey) == 0 then
    dropStaleHeads(queueKey, timeoutKey, heartbeatKey, now)
    wakeHead(queueKey, channel)
  end
  if place then
    return 1
  end
  return 0
end
