-- Routines every permit-semaphore script shares: Redis's own clock, permit ids stored as Redisson stores
-- them, and giving back the permits whose leases ended, which every script does before anything else.

-- A permit that never expires: Redisson's score for a permit taken without a lease.
local PERMIT_NEVER_EXPIRES = 922337203685477
-- At most this many expired permits are given back per call, so one call stays short however many
-- holders crashed; the next call gives back the rest.
local PERMIT_RECLAIM_LIMIT = 100

-- Now in milliseconds since the epoch, by Redis's clock: every holder's lease is measured by one
-- clock, whatever the clients' clocks say. Redis 6 replicates a script that read TIME by its effects
-- only when asked to (Redis 7 always does).
local function permitNowMs()
  redis.replicate_commands()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A whole number of milliseconds as Redis reads it (a Lua number would be formatted with %.14g).
local function permitMs(value)
  return string.format('%.0f', value)
end

-- The member a permit id (32 hex digits) has in the timeout set: its 16 bytes, as Redisson stores
-- the ids it generates, so either library can release a permit the other handed out.
local function permitMember(permitId)
  return (string.gsub(permitId, '%x%x', function(pair)
    return string.char(tonumber(pair, 16))
  end))
end

-- Gives back every permit whose lease ended (up to PERMIT_RECLAIM_LIMIT) and publishes the new count
-- of free permits when that count is positive. Returns how many permits came back.
local function reclaimExpiredPermits(counterKey, timeoutKey, channel, now)
  local expired = redis.call('zrangebyscore', timeoutKey, '-inf', permitMs(now), 'limit', 0, PERMIT_RECLAIM_LIMIT)
  if #expired == 0 then
    return 0
  end
  redis.call('zrem', timeoutKey, unpack(expired))
  local free = redis.call('incrby', counterKey, #expired)
  if free > 0 then
    redis.call('publish', channel, free)
  end
  return #expired
end

-- Creates a missing counter with `initialPermits` free (empty: leaves it missing). Returns true when
-- this call created it: the caller then publishes the count it leaves free, if any, because a waiter
-- of a client that knows no initial count (latchkey's, or Redisson's, whose SemaphorePubSub lets
-- that many of its waiters go) sleeps on the missing counter until it is told.
local function createCounter(counterKey, initialPermits)
  return initialPermits ~= '' and redis.call('set', counterKey, initialPermits, 'nx') ~= false
end

-- Milliseconds until the earliest lease among the permits out ends; -1 when none will end (no
-- permit is out, or the earliest one never expires). Called after reclaimExpiredPermits, so every
-- lease left ends after `now`.
local function untilEarliestExpiry(timeoutKey, now)
  local first = redis.call('zrange', timeoutKey, 0, 0, 'withscores')
  if first[1] == nil then
    return -1
  end
  local expiry = tonumber(first[2])
  if expiry >= PERMIT_NEVER_EXPIRES then
    return -1
  end
  return math.max(1, expiry - now)
end
