-- Routines shared by the read-write lock's scripts (Redisson's RReadWriteLock layout): one hash
-- with field `mode` (`read` or `write`), reader fields `<owner> -> count`, the writer field
-- `<owner>:write -> count`, and one lease key per read hold, `<base>:<owner>:rwlock_timeout:<n>`
-- (PX lease), where `<base>` is `{<lock key>}` (or the lock key itself when it has a hash tag).
-- The hash's PTTL is never shorter than any live hold's lease.

-- Redis's clock, in milliseconds since the epoch.
local function redisNowMs()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- Sets the key's PTTL to at least `lease` (the caller's text), never shortening it: another hold
-- (a reader with a longer lease, or the owner's own read holds beside its write hold) may need it.
local function extendTo(key, lease)
  local pttl = redis.call('pttl', key)
  if pttl == -1 or pttl < tonumber(lease) then
    redis.call('pexpire', key, lease)
  end
end

-- `<base>` of every reader's lease keys, cut from one reader's prefix
-- `<base>:<owner>:rwlock_timeout`, as Redisson does: the other readers are known only here, so
-- their lease keys are named in the script; they share the lock's hash tag, so its slot.
local function leaseBase(leasePrefix, owner)
  return string.sub(leasePrefix, 1, #leasePrefix - #(':' .. owner .. ':rwlock_timeout'))
end

-- The longest PTTL among all lease keys of all readers in the hash (-2: none is alive).
local function longestReaderLease(lockKey, base)
  local longest = -2
  local entries = redis.call('hgetall', lockKey)
  for i = 1, #entries, 2 do
    -- `mode` holds `read` or `write`, not a count.
    local count = tonumber(entries[i + 1])
    if count ~= nil then
      for n = 1, count do
        local pttl = redis.call('pttl', base .. ':' .. entries[i] .. ':rwlock_timeout:' .. n)
        if pttl > longest then
          longest = pttl
        end
      end
    end
  end
  return longest
end

-- After a reader field was decremented or deleted. When nobody is left, or in read mode no
-- reader's lease key is alive (the readers left are dead), the lock is deleted and `0`
-- published; otherwise, in read mode, the hash lives as long as the longest reader lease (a
-- writer's hash TTL is the writer's to keep). Returns true when the lock was freed.
local function afterReaderChange(lockKey, base, channel)
  if redis.call('hlen', lockKey) <= 1 then
    redis.call('del', lockKey)
    redis.call('publish', channel, '0')
    return true
  end
  if redis.call('hget', lockKey, 'mode') == 'read' then
    local longest = longestReaderLease(lockKey, base)
    if longest > 0 then
      redis.call('pexpire', lockKey, longest)
    else
      redis.call('del', lockKey)
      redis.call('publish', channel, '0')
      return true
    end
  end
  return false
end

-- Drops the reader's hold number `held` (its last one at 1): the count and that hold's lease key.
local function dropReadHold(lockKey, leasePrefix, owner, held)
  if held > 1 then
    redis.call('hincrby', lockKey, owner, '-1')
  else
    redis.call('hdel', lockKey, owner)
  end
  redis.call('del', leasePrefix .. ':' .. held)
end

-- After the writer field was deleted: the lock is deleted when nothing else is in it, or goes
-- to read mode for the owner's read holds from a downgrade; `1` is published either way, so
-- every waiter (readers above all) tries again.
local function afterWriterLeft(lockKey, channel)
  if redis.call('hlen', lockKey) <= 1 then
    redis.call('del', lockKey)
  else
    redis.call('hset', lockKey, 'mode', 'read')
  end
  redis.call('publish', channel, '1')
end
