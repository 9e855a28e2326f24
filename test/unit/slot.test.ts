/**
 * The cluster slot of a key, against values `CLUSTER KEYSLOT` gave on Redis 7.0: hash tags (first
 * `{` to the first `}` after it, empty tags ignored), UTF-8 bytes, the empty key.
 */
import { describe, expect, it } from 'vitest';
import { keySlot } from '../../src/redis/slot.js';

describe('keySlot', () => {
  it.each([
    ['foo', 12182],
    ['bar', 5061],
    ['123456789', 12739],
    ['{user1000}.following', 3443],
    ['héllo', 11061],
    ['a{b}c', 3300],
    ['{}x', 10595],
    ['{a}{b}', 15495],
    ['latchkey_request:{orders}:x', 105],
    ['', 0],
    ['redisson_lock__channel:{invoice:42}', 13368],
  ])('%j is in slot %i, as CLUSTER KEYSLOT says', (key, slot) => {
    expect(keySlot(key)).toBe(slot);
  });

  it('puts every name with the same hash tag in one slot', () => {
    expect(keySlot('{invoice:42}:timeout')).toBe(keySlot('invoice:42'));
    expect(keySlot('latchkey_queue:{invoice:42}')).toBe(keySlot('invoice:42'));
    expect(keySlot('x{invoice:42}y{z}')).toBe(keySlot('invoice:42'));
  });
});
