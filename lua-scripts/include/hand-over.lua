-- Hands a freed lock to the longest-waiting live waiter, or announces it free.
-- The wait queue is a list in arrival order; each entry is
-- `<ticket> <lease ms> <grant channel> <owner field>`. A waiter is live when its client still
-- listens on its grant channel on this server: PUBSUB NUMSUB counts a subscriber here. (PUBLISH's
-- own count is not asked first-hand: Redis passes every message on to its replicas, so a grant
-- published to a waiter whose subscriber sits on a replica would reach it there, while this
-- server counted it unheard and gave the lock to the next waiter.) Dead entries are dropped on the
-- way, at most 64 per call so one release stays short; past that the lock is announced free and
-- the entries left behind are dropped by later releases (their clients re-check on their own).
-- With no live waiter, the unlock message `0` goes out on the lock's channel.
-- Waiters of Redisson's own protocol get their turn: see foreign-waiters.lua.
-- @include foreign-waiters

-- `foreignKey` is the lock's foreign key (foreign-waiters.lua).
-- `owner` is the field of the holder giving the lock up, whose count is down to 1; nil when the
-- lock key is gone already. The new owner's field goes in before the old one goes out, so the
-- key is kept rather than deleted and made again. `mint` is nil, or a function that returns a
-- fencing token for the new holder: the grant message is then `<ticket> <token>`. Returns 1
-- when the lock was handed over, 0 when announced.
local function handOver(lockKey, queueKey, foreignKey, channel, owner, mint)
  for _ = 1, 64 do
    local entry = redis.call('lpop', queueKey)
    if not entry then
      break
    end
    local ticket, lease, grantChannel, waiter = string.match(entry, '^(%S+) (%d+) (%S+) (.+)$')
    -- pcall: a server that refuses PUBSUB (an ACL user without it) hands nothing over; the entry
    -- counts as dead, and its waiter takes the lock by asking once it hears the lock is free. A
    -- refusal is a table too ({ err = ... }), without a count.
    local counted = ticket ~= nil and redis.pcall('pubsub', 'numsub', grantChannel)
    if type(counted) == 'table' and type(counted[2]) == 'number' and counted[2] > 0 then
      local turn, handed = foreignTurn(foreignKey, channel)
      if turn then
        -- The waiter keeps its place, first in line once the foreign listeners had their turn.
        redis.call('lpush', queueKey, entry)
        break
      end
      local message = ticket
      if mint ~= nil then
        message = ticket .. ' ' .. mint()
      end
      -- pcall: in the sharded twin (a cluster), a grant channel outside the lock's slot is
      -- refused by Redis; such an entry counts as dead rather than failing the release.
      local reached = redis.pcall('publish', grantChannel, message)
      if type(reached) == 'number' and reached > 0 then
        redis.call('hset', lockKey, waiter, '1')
        if owner ~= nil and owner ~= waiter then
          redis.call('hdel', lockKey, owner)
        end
        redis.call('pexpire', lockKey, lease)
        if handed ~= nil then
          countHandOver(foreignKey, handed)
        end
        return 1
      end
    end
  end
  if owner ~= nil then
    redis.call('del', lockKey)
  end
  redis.call('publish', channel, '0')
  return 0
end
