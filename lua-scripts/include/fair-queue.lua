-- The fair lock's queue of waiting owners, as Redisson's RFairLock keeps it: a list of owner fields
-- in arrival order, and a sorted set of the same fields scored by the absolute time (ms since the
-- epoch, by Redis's clock) at which each loses its place unless it asks again. A waiter's place is
-- only taken from it at the head: a head whose time has come is dropped, by every script, before it
-- looks at the queue, exactly as Redisson's scripts do, so both agree on who is next.

-- Now by Redis's clock, in whole milliseconds since the epoch.
local function redisNowMs()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A number computed here, as the decimal text Redis is given (never an exponent form).
local function asText(number)
  return string.format('%d', number)
end

-- Drops every head whose place lapsed at `now`. A head with no score at all is dropped too:
-- nobody keeps it alive, so it would hold the line up forever.
local function dropStaleHeads(queueKey, timeoutKey, now)
  while true do
    local head = redis.call('lindex', queueKey, 0)
    if not head then
      return
    end
    local deadline = tonumber(redis.call('zscore', timeoutKey, head))
    if deadline ~= nil and deadline > now then
      return
    end
    redis.call('zrem', timeoutKey, head)
    redis.call('lpop', queueKey)
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

-- Takes `owner` out of the queue and its deadlines; a free lock whose head this was is then
-- announced to the new head, after dropping heads whose place lapsed at `now`. Returns 1 when the
-- owner was queued.
local function leaveQueue(lockKey, queueKey, timeoutKey, channel, owner, now)
  local wasHead = redis.call('lindex', queueKey, 0) == owner
  local removed = redis.call('lrem', queueKey, '0', owner)
  redis.call('zrem', timeoutKey, owner)
  if wasHead and redis.call('exists', lockKey) == 0 then
    dropStaleHeads(queueKey, timeoutKey, now)
    wakeHead(queueKey, channel)
  end
  if removed > 0 then
    return 1
  end
  return 0
end
