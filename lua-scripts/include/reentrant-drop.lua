-- Takes an owner out of a reentrant lock without a release: a waiter that gave up, a hold given
-- up for lost, or every holder at once. Contracts: lock/withdraw.lua, lock/abandon.lua and
-- lock/force-release.lua, with the scripts' keys and arguments as parameters (`handed` a boolean); `mint` as
-- in hand-over.lua.
-- @include hand-over

-- After a field was deleted: an emptied hash is deleted by Redis itself, and the lock is then
-- free for the next waiter.
local function afterDrop(lockKey, queueKey, foreignKey, channel, mint)
  if redis.call('exists', lockKey) == 0 then
    handOver(lockKey, queueKey, foreignKey, channel, nil, mint)
  end
end

local function withdrawWaiter(lockKey, queueKey, foreignKey, channel, owner, waiter, handed, mint)
  if redis.call('lrem', queueKey, '1', waiter) == 1 or not handed then
    return 0
  end
  if redis.call('hget', lockKey, owner) ~= '1' then
    return 0
  end
  redis.call('hdel', lockKey, owner)
  afterDrop(lockKey, queueKey, foreignKey, channel, mint)
  return 1
end

local function abandonHold(lockKey, queueKey, foreignKey, channel, owner, mint)
  if redis.call('hdel', lockKey, owner) == 0 then
    return 0
  end
  afterDrop(lockKey, queueKey, foreignKey, channel, mint)
  return 1
end

local function forceRelease(lockKey, queueKey, foreignKey, channel, mint)
  if redis.call('del', lockKey) == 1 then
    handOver(lockKey, queueKey, foreignKey, channel, nil, mint)
    return 1
  end
  return 0
end
