-- Renews the leases of many simple token locks in one call (the watchdog's batch).
-- KEYS[i] lock key of the i-th hold, for i = 1 .. #KEYS
-- ARGV[1] lease: new lease for every key that still holds its token, in milliseconds (integer > 0)
-- ARGV[i + 1] token of the i-th hold
-- Returns an array with one integer per key: 1 renewed, 0 the key no longer holds that token.
-- Handed on to Redis as the caller's text: Redis would format a Lua number with sprintf.
local lease = ARGV[1]
local renewed = {}

for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[i + 1] then
    redis.call('pexpire', KEYS[i], lease)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
