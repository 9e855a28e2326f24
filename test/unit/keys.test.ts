import { describe, expect, it } from 'vitest';
import { lockKey, ownerField, requestKey, unlockChannel } from '../../src/keys.js';

describe('key and channel names', () => {
  it("uses Redisson's unlock channel, with the key as hash tag", () => {
    expect(unlockChannel(lockKey('', 'invoice:42'))).toBe('redisson_lock__channel:{invoice:42}');
    expect(unlockChannel(lockKey('billing:', 'invoice:42'))).toBe(
      'redisson_lock__channel:{billing:invoice:42}',
    );
  });

  it('keeps a key that already has a hash tag as it is', () => {
    expect(unlockChannel('{orders}:7')).toBe('redisson_lock__channel:{orders}:7');
    expect(requestKey('{orders}:7', 'r1')).toBe('latchkey_request:{orders}:7:r1');
  });

  it('puts request keys in the slot of their lock', () => {
    expect(requestKey('invoice:42', 'abc')).toBe('latchkey_request:{invoice:42}:abc');
  });

  it("builds the owner field as Redisson's <uuid>:<threadId>", () => {
    expect(ownerField('6f1c2a40-0000-4000-8000-000000000000', '7')).toBe(
      '6f1c2a40-0000-4000-8000-000000000000:7',
    );
  });
});
