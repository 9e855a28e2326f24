-- Hands a freed lock to the longest-waiting live waiter, or announces it free.
-- The wait queue is a list in arrival order; each entry is
-- `<ticket> <lease ms> <grant channel> <owner field>`. A waiter is live when its client still
-- listens on its grant channel: PUBLISH reaches a subscriber. Dead entries are dropped on the
-- way. With no live waiter, the unlock message `0` goes out on the lock's channel.
-- Call it once the lock key is gone. Returns 1 when the lock was handed over, 0 when announced.
local function handOver(lockKey, queueKey, channel)
  for _ = 1, 64 do
    local entry = redis.call('lpop', queueKey)
    if not entry then
      break
    end
    local ticket, lease, grantChannel, owner = string.match(entry, '^(%S+) (%d+) (%S+) (.+)$')
    if ticket ~= nil and redis.call('publish', grantChannel, ticket) > 0 then
      redis.call('hset', lockKey, owner, '1')
      redis.call('pexpire', lockKey, lease)
      return 1
    end
  end
  redis.call('publish', channel, '0')
  return 0
end
