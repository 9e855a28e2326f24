// One owner's hold on one lock, with no Redis: its lease only ever moves later, its deadline
// comes a little before the lease ends, its signal aborts with the loss in the same turn (made
// before or after it), every read of the signal checks the hold first, and the release of a
// lost hold says why it was lost.
import { describe, expect, it } from 'vitest';
import { LockLostError, LockNotOwnedError } from '../../../../src/errors.js';
import { chainId } from '../../../../src/engine/chains.js';
import { Hold, lostRelease } from '../../../../src/engine/holds/hold.js';
import type { Protocol, Target } from '../../../../src/engine/types.js';

const TARGET: Target = {
  name: 'orders',
  key: 'app:orders',
  channel: 'unlock:orders',
  protocol: {} as Protocol,
};

function hold(ttlMs = 30_000): Hold {
  return new Hold(TARGET, 'client:7', ttlMs, true);
}

describe('Hold', () => {
  it('takes its name, key and channel from the target, and its chain from key and field', () => {
    const made = hold();
    expect([made.name, made.key, made.channel]).toEqual(['orders', 'app:orders', 'unlock:orders']);
    expect(made.chain).toBe(chainId('app:orders', 'client:7'));
    expect([made.count, made.releasing, made.lost]).toEqual([0, 0, false]);
  });

  it('runs its lease from the start of the latest request that set it, never moving it back', () => {
    const made = hold(30_000);
    made.extend(1_000);
    expect(made.validUntil).toBe(31_000);
    made.extend(500);
    expect(made.validUntil).toBe(31_000);
    made.extend(2_000);
    expect(made.validUntil).toBe(32_000);
  });

  it('puts its deadline 1% of the lease plus 2 ms before the lease ends', () => {
    const made = hold(30_000);
    made.extend(0);
    expect(made.deadline).toBe(30_000 - 302);
    const short = hold(150);
    short.extend(0);
    expect(short.deadline).toBe(150 - 3);
  });

  it('aborts its signal with the loss as it is declared, and a signal asked for later is aborted already', () => {
    const made = hold();
    const signal = made.signal;
    const heard: unknown[] = [];
    signal.addEventListener('abort', () => heard.push(signal.reason));
    expect(signal.aborted).toBe(false);
    const error = new LockLostError('Lock "orders" was force-unlocked', 'force-unlocked');
    made.lose(error);
    expect(heard).toEqual([error]);
    expect(made.lost).toBe(true);
    expect(made.signal).toBe(signal);

    const late = hold();
    late.lose(error);
    expect(late.signal.aborted).toBe(true);
    expect(late.signal.reason).toBe(error);
  });

  it('checks itself on every read of its signal, until it is lost', () => {
    const made = hold();
    let checks = 0;
    made.onVerify = () => {
      checks += 1;
    };
    const signal = made.signal;
    expect(checks).toBe(1);
    void signal.aborted;
    void signal.reason;
    signal.throwIfAborted();
    expect(checks).toBe(4);
    // A check that finds the hold past its deadline declares the loss, and the read sees it.
    const error = new LockLostError('Lock "orders" was lost', 'expired');
    made.onVerify = (checked) => checked.lose(error);
    expect(signal.aborted).toBe(true);
    expect(() => signal.throwIfAborted()).toThrow(error);
    made.onVerify = () => {
      checks += 1;
    };
    made.verify();
    expect(checks).toBe(4);
  });

  it('refuses the release of a lost hold with LockNotOwnedError, saying why it was lost', () => {
    const made = hold();
    const error = new LockLostError(
      'Lock "orders" was lost: no renewal was confirmed within its 30000 ms lease',
      'expired',
    );
    made.lose(error);
    const refused = lostRelease(made);
    expect(refused).toBeInstanceOf(LockNotOwnedError);
    expect(refused.message).toBe(`This lease cannot be released: ${error.message}`);
    expect(refused.cause).toBe(error);
    expect(lostRelease(hold()).message).toBe('This lease cannot be released: Lock "orders" was lost');
  });
});
