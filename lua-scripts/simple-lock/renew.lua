-- Renews the leases of many simple token locks in one call (the watchdog's batch).
-- KEYS[i] lock key of the i-th hold, for i = 1 .. #KEYS
-- ARGV[1] lease: new lease for every key that still holds its token, in milliseconds (integer > 0)
-- ARGV[i + 1] token of the i-th hold
-- Returns an array with one integer per key: 1 renewed, 0 the key no longer holds that token.
-- Handed on to Redis as the caller's text: Redis would format a Lua number with sprintf.
-- On a read-only replica every answer here fails with READONLY
-- (include/refuse-on-replica-string.lua), so a client that reached one asks again rather than
-- hear of its hold from a stale node. On a master out of memory (maxmemory reached, no eviction)
-- a call in which no key holds its token fails with OOM instead.
local lease = ARGV[1]
local renewed = {}
-- A key whose answer came from reads alone.
local unheld = nil

-- @include refuse-on-replica-string

for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[i + 1] then
    redis.call('pexpire', KEYS[i], lease)
    renewed[i] = 1
  else
    renewed[i] = 0
    unheld = KEYS[i]
  end
end
if unheld ~= nil then
  -- On a replica, ask the master instead. Once, after the renewals: a master out of memory
  -- refuses SETRANGE only as a script's first write, so a call that renews any hold answers.
  refuseOnReplicaString(unheld)
end
return renewed
