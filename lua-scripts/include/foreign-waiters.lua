-- Fairness to waiters of Redisson's own protocol, which are not in latchkey's wait queue: they
-- listen on the lock's unlock channel and try when they hear `0`. Every latchkey client that
-- listens on a lock's channel also listens on its presence twin, `latchkey_present:<channel>`
-- (subscribed before the channel and left after it), so PUBSUB NUMSUB of the two tells whether
-- anyone else listens. While someone does, a free lock goes to latchkey's queue at most
-- FOREIGN_HANDOVERS times in a row (counted in the foreign key, `latchkey_foreign:{<lock key>}`);
-- the next free is left to the foreign listeners: `0` goes out, and the foreign key holds the
-- channel's name for FOREIGN_RESERVE_MS, during which latchkey's acquire takes a free lock only
-- once no foreign listener remains (a Redisson waiter stops listening once it has the lock).
-- With no foreign listener, nothing here changes what the scripts do.

-- Hand-overs in a row while foreign waiters listen, how long a free left to them is theirs, and
-- how long the count of hand-overs in a row outlives the last one.
local FOREIGN_HANDOVERS = 2
local FOREIGN_RESERVE_MS = '100'
local FOREIGN_COUNT_TTL_MS = '10000'

-- Whether anyone but latchkey listens on `channel`: its listeners outnumber its presence twin's.
-- pcall: a server that refuses PUBSUB (an ACL user without it) sees no foreign listener.
local function foreignListening(channel)
  local counts = redis.pcall('pubsub', 'numsub', channel, 'latchkey_present:' .. channel)
  return type(counts) == 'table' and type(counts[2]) == 'number' and type(counts[4]) == 'number'
    and counts[2] > counts[4]
end

-- For a free about to be handed to a live waiter: `turn` true when it goes to the foreign
-- listeners instead (the reservation is made); otherwise `handed`, when foreign listeners wait,
-- is the count of hand-overs in a row so far, for countHandOver once the hand-over is made.
local function foreignTurn(foreignKey, channel)
  if not foreignListening(channel) then
    return false, nil
  end
  local handed = tonumber(redis.call('get', foreignKey)) or 0
  if handed < FOREIGN_HANDOVERS then
    return false, handed
  end
  redis.call('set', foreignKey, channel, 'px', FOREIGN_RESERVE_MS)
  return true, handed
end

local function countHandOver(foreignKey, handed)
  redis.call('set', foreignKey, tostring(handed + 1), 'px', FOREIGN_COUNT_TTL_MS)
end

-- For latchkey's acquire of a free lock: the PTTL of a reservation for foreign listeners that
-- still holds (someone but latchkey still listens on the channel it names), or nil.
local function reservedForeign(foreignKey)
  local reserved = redis.call('get', foreignKey)
  if not reserved or tonumber(reserved) ~= nil or not foreignListening(reserved) then
    return nil
  end
  return redis.call('pttl', foreignKey)
end
