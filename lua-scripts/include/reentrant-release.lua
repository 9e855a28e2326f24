-- Gives back one hold of a reentrant lock, and undoes an acquire given up with its outcome unknown.
-- Contracts: lock/release.lua and lock/cancel-acquire.lua, with the scripts' keys and arguments
-- as parameters (`expected` a number); `mint` as in hand-over.lua.
-- @include hand-over
-- @include refuse-on-replica

-- The owner's last hold hands the lock on; an earlier one only counts down.
local function dropOneHold(lockKey, queueKey, foreignKey, channel, owner, held, lease, mint)
  if held > 1 then
    redis.call('hincrby', lockKey, owner, '-1')
    if lease ~= nil then
      redis.call('pexpire', lockKey, lease)
    end
    return 0
  end
  handOver(lockKey, queueKey, foreignKey, channel, owner, mint)
  return 1
end

local function releaseHold(lockKey, queueKey, foreignKey, channel, lease, owner, expected, mint)
  local held = tonumber(redis.call('hget', lockKey, owner)) or 0
  if held == expected and held > 0 then
    return dropOneHold(lockKey, queueKey, foreignKey, channel, owner, held, lease, mint)
  end
  -- Every other answer comes from reads alone.
  refuseOnReplica(lockKey)
  if held == 0 then
    return nil
  end
  -- A replay of a partial release whose reply was lost: report what it did, never apply it twice.
  if held == expected - 1 then
    return 0
  end
  return -4
end

local function cancelAcquire(lockKey, requestKey, queueKey, foreignKey, channel, owner, expected, requestTtl, waiter, queuedAs, mint)
  redis.call('set', requestKey, '1', 'px', requestTtl)
  for _, entry in ipairs({ waiter, queuedAs }) do
    if entry ~= '' then
      redis.call('lrem', queueKey, '1', entry)
    end
  end
  local held = tonumber(redis.call('hget', lockKey, owner)) or 0
  if held ~= expected + 1 then
    return 0
  end
  dropOneHold(lockKey, queueKey, foreignKey, channel, owner, held, nil, mint)
  return 1
end
