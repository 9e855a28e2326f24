-- Takes a reentrant lock for one owner, or re-enters it (Redisson RLock layout); queues a waiter.
-- KEYS[1] lock key: hash of owner field -> hold count; its PTTL is the lease
-- KEYS[2] request key: exists only when cancel-acquire.lua gave this request up
-- KEYS[3] wait queue: list of waiters in arrival order (see include/hand-over.lua)
-- ARGV[1] lease: lease to set on the lock key, in milliseconds (integer > 0)
-- ARGV[2] owner: hash field of the owner, `<clientId>:<ownerId>`
-- ARGV[3] expected: hold count the caller believes the owner has before this call (integer >= 0)
-- ARGV[4] waiter: queue entry `<ticket> <lease> <grant channel> <owner>`; empty: not waiting
-- ARGV[5] queued: where the waiter stands: `new` (not queued: queue it if the lock is held),
--   `in` (queued), `maybe` (perhaps dropped: queue it unless it is there); empty: no waiter
-- ARGV[6] queue TTL: how long the queue lives after a waiter joins, in milliseconds (integer > 0)
-- Returns nil when the owner now holds the lock at count expected + 1 (taken, re-entered, handed
--   over by a release, or a replay of this same request that had already been applied; the lease
--   is set either way, and the waiter's entry is removed);
--   an integer >= -1 when another owner holds the lock: its PTTL in milliseconds (-1: no expiry);
--   the waiter, if given, is then queued;
--   -3 when the request was cancelled (KEYS[2] exists) and would take or re-enter the lock:
--   nothing is changed (a cancelled request may still queue its waiter; the client passes a
--   hand-over to a waiter it gave up on);
--   -4 when the owner's hold count is neither expected nor expected + 1 (its hold was lost).
local lockKey = KEYS[1]
local requestKey = KEYS[2]
local queueKey = KEYS[3]
-- Numbers handed on to Redis stay the caller's text: Redis would format Lua numbers with sprintf.
local lease = ARGV[1]
local owner = ARGV[2]
local expected = tonumber(ARGV[3])
local waiter = ARGV[4]
local queued = ARGV[5]
local queueTtl = ARGV[6]

local pttl = redis.call('pttl', lockKey)
-- A free lock has no fields to read.
local held = 0
if pttl ~= -2 then
  held = tonumber(redis.call('hget', lockKey, owner)) or 0
end
local wasQueued = queued == 'in' or queued == 'maybe'

if held == expected + 1 then
  -- Handed over to this owner while it waited, or the reply to this request was lost and the
  -- caller is asking again: either way it holds the lock now.
  redis.call('pexpire', lockKey, lease)
  if wasQueued then
    redis.call('lrem', queueKey, '1', waiter)
  end
  return nil
end
if held ~= expected then
  return -4
end
if held == 0 and pttl ~= -2 then
  if queued == 'new' or (queued == 'maybe' and not redis.call('lpos', queueKey, waiter)) then
    redis.call('rpush', queueKey, waiter)
  end
  if queued ~= '' and queued ~= 'in' then
    -- Waiters that queue keep the queue alive; it goes away on its own when they are gone.
    redis.call('pexpire', queueKey, queueTtl)
  end
  return pttl
end

-- Taking a free lock or re-entering: only here can a late copy of a cancelled request do harm.
if redis.call('exists', requestKey) == 1 then
  return -3
end
redis.call('hincrby', lockKey, owner, '1')
redis.call('pexpire', lockKey, lease)
if wasQueued then
  redis.call('lrem', queueKey, '1', waiter)
end
return nil
