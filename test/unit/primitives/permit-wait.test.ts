// A semaphore acquire's wait as the engine's wait loop keeps it: what it resolves with or throws
// once the loop ends it (taken, ran out, ran out on a grant too few replicas acknowledged), for
// an acquire and for a tryAcquire, with no Redis.
import { describe, expect, it } from 'vitest';
import { LockTimeoutError, ReplicationError } from '../../../src/errors.js';
import { PermitWait, type PermitSource } from '../../../src/primitives/semaphore/permit-wait.js';

const source: PermitSource = {
  name: 'coupons',
  channel: 'redisson_sc:{coupons}',
  attempt: () => Promise.resolve({ status: 'too-few', free: 0 }),
  giveBack: () => Promise.resolve(),
};

describe('PermitWait', () => {
  it('says what it waits for, on its channel, asking for its permits', () => {
    const wait = new PermitWait(source, 3, true);
    expect(wait.what).toBe('semaphore "coupons"');
    expect(wait.kind).toBe('semaphore');
    expect(wait.channel).toBe('redisson_sc:{coupons}');
    expect(wait.demand).toBe(3);
  });

  it('ends an acquire with undefined once taken, and with a timeout error when it ran out', () => {
    const wait = new PermitWait(source, 2, true);
    expect(wait.end(2)).toBeUndefined();
    expect(() => wait.end(null)).toThrow(
      new LockTimeoutError('Timed out waiting for 2 permits of semaphore "coupons"'),
    );
  });

  it('ends a tryAcquire with whether it took them', () => {
    const wait = new PermitWait(source, 1, false);
    expect(wait.end(1)).toBe(true);
    expect(wait.end(null)).toBe(false);
  });

  it('ends a wait that ran out on an unreplicated grant with that grant, not a timeout', async () => {
    const shortfall = new ReplicationError('1 permit was granted but only 0 of 1 acknowledged', 0, 1);
    const unreplicated: PermitSource = {
      ...source,
      attempt: () => Promise.resolve({ status: 'unreplicated', error: shortfall }),
    };
    for (const throwOnTimeout of [true, false]) {
      const wait = new PermitWait(unreplicated, 1, throwOnTimeout);
      // The deadline has passed: no pause, try again at once.
      await expect(wait.attempt(performance.now() - 1)).resolves.toEqual({ done: false, recheckMs: 0 });
      expect(() => wait.end(null)).toThrow(shortfall);
    }
  });
});
