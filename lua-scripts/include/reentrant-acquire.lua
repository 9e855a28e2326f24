-- Takes or re-enters a reentrant lock (hash `owner -> hold count`) for one owner, or queues it.
-- The contract is lock/acquire.lua's, with the script's keys and arguments as parameters (`expected` a number,
-- `retry` a boolean), except that taking the lock returns true, so each kind adds its own reply.
-- @include refuse-on-replica
-- @include foreign-waiters
local function acquireHold(lockKey, requestKey, queueKey, foreignKey, lease, owner, expected, waiter, queuedAs, queueTtl, retry)
  -- The owner holds the lock now: it waits no longer. An earlier copy of this call may have
  -- queued `waiter` before the lock came free.
  local function dequeue()
    if queuedAs ~= '' then
      redis.call('lrem', queueKey, '1', queuedAs)
    end
    if retry and waiter ~= '' then
      redis.call('lrem', queueKey, '1', waiter)
    end
  end

  local pttl = redis.call('pttl', lockKey)
  -- A free lock has no fields to read.
  local held = 0
  if pttl ~= -2 then
    held = tonumber(redis.call('hget', lockKey, owner)) or 0
  end

  if held == expected + 1 then
    -- Handed over to this owner while it waited, or the reply to this request was lost and the
    -- caller is asking again: either way it holds the lock now.
    redis.call('pexpire', lockKey, lease)
    dequeue()
    return true
  end
  if held ~= expected then
    -- From reads alone: on a replica, ask the master instead.
    refuseOnReplica(lockKey)
    return -4
  end
  -- A free lock left to waiters of Redisson's protocol (foreign-waiters.lua) is busy for latchkey
  -- until one of them took it, or the reservation ran out.
  if held == 0 and pttl == -2 then
    pttl = reservedForeign(foreignKey) or -2
  end
  if held == 0 and pttl ~= -2 then
    if waiter == '' then
      return { pttl, 0 }
    end
    local pushed = 1
    if queuedAs ~= '' and redis.call('lpos', queueKey, queuedAs) then
      pushed = 0
    elseif not (retry and redis.call('lpos', queueKey, waiter)) then
      redis.call('rpush', queueKey, waiter)
    end
    -- Waiters that queue keep the queue alive; it goes away on its own when they are gone.
    redis.call('pexpire', queueKey, queueTtl)
    return { pttl, pushed }
  end

  -- Taking a free lock or re-entering: only here can a late copy of a cancelled request do harm.
  if redis.call('exists', requestKey) == 1 then
    return -3
  end
  redis.call('hincrby', lockKey, owner, '1')
  redis.call('pexpire', lockKey, lease)
  dequeue()
  return true
end
