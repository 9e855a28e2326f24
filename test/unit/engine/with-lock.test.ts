// The parts of every `withLock`, with no Redis: the acquire options and the callback checked
// before anything is sent, and the body run with its lease — in the caller's async context, with
// a non-reentrant lock marked held inside the callback only — released however the callback
// ends, and rejecting with the lease's loss when the lock was lost meanwhile.
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, LockError, LockLostError } from '../../../src/errors.js';
import { Hold } from '../../../src/engine/holds/hold.js';
import { Lease, type LeaseHost } from '../../../src/engine/lease.js';
import type { Protocol } from '../../../src/engine/types.js';
import { checkAcquireOptions, checkCallback, withLease } from '../../../src/engine/with-lock.js';
import { currentContext, runInContext, type OwnerContext } from '../../../src/owner.js';

const HELD_KEY = 'client-uuid\norders';

/** A lease on a hold of its own, whose releases are counted (and fail with `failure`, if set). */
class FakeHost implements LeaseHost {
  releases = 0;
  failure: Error | undefined;
  readonly hold = new Hold(
    { name: 'orders', key: 'orders', channel: 'unlock:orders', protocol: {} as Protocol },
    'field',
    30_000,
    true,
  );
  constructor() {
    this.hold.count = 1;
    this.hold.extend(performance.now());
  }
  release(): Promise<void> {
    this.releases += 1;
    return this.failure === undefined ? Promise.resolve() : Promise.reject(this.failure);
  }
  lease(): Lease {
    return new Lease(this.hold, this);
  }
}

function invalid(run: () => unknown): InvalidArgumentError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return error as InvalidArgumentError;
  }
  throw new Error('expected an InvalidArgumentError');
}

describe('checkAcquireOptions', () => {
  it('defaults the wait and leaves the lease to the watchdog', () => {
    expect(checkAcquireOptions(undefined, 0)).toEqual({ waitMs: 0, leaseMs: undefined, signal: undefined });
    expect(checkAcquireOptions({}, Number.POSITIVE_INFINITY).waitMs).toBe(Number.POSITIVE_INFINITY);
  });

  it('takes a wait, a lease and a signal as given', () => {
    const signal = new AbortController().signal;
    expect(checkAcquireOptions({ waitMs: 250, leaseMs: 5_000, signal }, 0)).toEqual({
      waitMs: 250,
      leaseMs: 5_000,
      signal,
    });
    expect(checkAcquireOptions({ waitMs: Number.POSITIVE_INFINITY }, 0).waitMs).toBe(
      Number.POSITIVE_INFINITY,
    );
  });

  it('rejects what is not an options object, and an option it does not know', () => {
    expect(invalid(() => checkAcquireOptions([], 0)).message).toBe(
      'Expected `options` to be an options object, got an array',
    );
    expect(invalid(() => checkAcquireOptions({ timeoutMs: 5 }, 0)).message).toBe(
      'Unknown option `timeoutMs` in `options`; expected one of `waitMs`, `leaseMs`, `signal`',
    );
  });

  it('rejects a wait or lease that is not a whole number of milliseconds in range, and a signal that is not one', () => {
    expect(invalid(() => checkAcquireOptions({ waitMs: -1 }, 0)).message).toMatch(
      /^Expected `waitMs` to be a whole number of milliseconds from 0 to \d+, or Infinity, got `-1` \(number\)$/,
    );
    expect(invalid(() => checkAcquireOptions({ leaseMs: 0 }, 0)).message).toMatch(
      /^Expected `leaseMs` to be a whole number of milliseconds from 1 to \d+, got `0` \(number\)$/,
    );
    invalid(() => checkAcquireOptions({ leaseMs: 1.5 }, 0));
    invalid(() => checkAcquireOptions({ leaseMs: Number.POSITIVE_INFINITY }, 0));
    invalid(() => checkAcquireOptions({ waitMs: '100' }, 0));
    expect(invalid(() => checkAcquireOptions({ signal: 'stop' }, 0)).message).toBe(
      'Expected `signal` to be an AbortSignal, got "stop" (string of length 4)',
    );
  });

  it("applies the kind's own bound to a lease that was given, and only then", () => {
    const bounded: number[] = [];
    const bound = (leaseMs: number): void => {
      bounded.push(leaseMs);
      if (leaseMs < 100) throw new InvalidArgumentError('Expected `leaseMs` to be at least 100');
    };
    checkAcquireOptions({ waitMs: 5 }, 0, bound);
    checkAcquireOptions({ leaseMs: 500 }, 0, bound);
    expect(() => checkAcquireOptions({ leaseMs: 50 }, 0, bound)).toThrow(
      'Expected `leaseMs` to be at least 100',
    );
    expect(bounded).toEqual([500, 50]);
  });
});

describe('checkCallback', () => {
  it('accepts a function and rejects anything else, saying what came', () => {
    expect(() => checkCallback(() => undefined)).not.toThrow();
    expect(invalid(() => checkCallback('ship order')).message).toBe(
      'Expected `fn` to be a function, got "ship order" (string of length 10)',
    );
    expect(invalid(() => checkCallback(undefined)).message).toBe(
      'Expected `fn` to be a function, got `undefined`',
    );
  });
});

describe('withLease', () => {
  it('runs the callback with the lease and releases it after, resolving with what it returned', async () => {
    const host = new FakeHost();
    const lease = host.lease();
    let seen: Lease | undefined;
    const result = await withLease(
      undefined,
      () => Promise.resolve(lease),
      (given) => {
        seen = given;
        expect(host.releases).toBe(0);
        return 'shipped';
      },
    );
    expect(result).toBe('shipped');
    expect(seen).toBe(lease);
    expect(host.releases).toBe(1);
  });

  it('acquires in a new async context that the callback shares, for a reentrant lock', async () => {
    const host = new FakeHost();
    let acquiredIn: OwnerContext | undefined;
    let ranIn: OwnerContext | undefined;
    await withLease(
      undefined,
      () => {
        acquiredIn = currentContext();
        return Promise.resolve(host.lease());
      },
      async () => {
        await Promise.resolve();
        ranIn = currentContext();
      },
    );
    expect(acquiredIn).toBeDefined();
    expect(ranIn).toBe(acquiredIn);
    expect(currentContext()).toBeUndefined();
  });

  it('keeps the owner of the calling context, and marks a non-reentrant lock held inside the callback only', async () => {
    const host = new FakeHost();
    const outer: OwnerContext = { ownerId: '42', nonReentrant: new Set(['client-uuid\ninvoices']) };
    let acquiredIn: OwnerContext | undefined;
    let ranIn: OwnerContext | undefined;
    await runInContext(outer, () =>
      withLease(
        HELD_KEY,
        () => {
          acquiredIn = currentContext();
          return Promise.resolve(host.lease());
        },
        async () => {
          await Promise.resolve();
          ranIn = currentContext();
        },
      ),
    );
    expect(acquiredIn).toBe(outer);
    expect(ranIn?.ownerId).toBe('42');
    expect([...(ranIn?.nonReentrant ?? [])].sort()).toEqual(['client-uuid\ninvoices', HELD_KEY].sort());
    // The caller's own context is left as it was: side-by-side callbacks still exclude each other.
    expect(outer.nonReentrant.has(HELD_KEY)).toBe(false);
  });

  it('releases the lease when the callback throws, and rejects with what it threw', async () => {
    const host = new FakeHost();
    const failure = new Error('card declined');
    await expect(
      withLease(
        undefined,
        () => Promise.resolve(host.lease()),
        () => {
          throw failure;
        },
      ),
    ).rejects.toBe(failure);
    expect(host.releases).toBe(1);
  });

  it("rejects with the callback's error even when the release after it failed", async () => {
    const host = new FakeHost();
    host.failure = new LockError('REDIS_ERROR', 'Redis failed while releasing lock "orders"');
    const failure = new Error('card declined');
    await expect(
      withLease(
        undefined,
        () => Promise.resolve(host.lease()),
        () => Promise.reject(failure),
      ),
    ).rejects.toBe(failure);
  });

  it("rejects with the lease's loss when the lock was lost while the callback ran, with what it threw as the cause", async () => {
    const host = new FakeHost();
    const lost = new LockLostError('Lock "orders" was lost: it expired or was taken over', 'not-owner');
    const aborted = new Error('The operation was aborted');
    const error = await withLease(
      undefined,
      () => Promise.resolve(host.lease()),
      () => {
        host.hold.lose(lost);
        throw aborted;
      },
    ).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(LockLostError);
    expect((error as LockLostError).message).toBe(lost.message);
    expect((error as LockLostError).reason).toBe('not-owner');
    expect((error as LockLostError).cause).toBe(aborted);
  });

  it('rejects with the loss itself when the callback threw it, or finished after the lock was lost', async () => {
    const thrown = new FakeHost();
    const lost = new LockLostError('Lock "orders" was force-unlocked', 'force-unlocked');
    await expect(
      withLease(
        undefined,
        () => Promise.resolve(thrown.lease()),
        () => {
          thrown.hold.lose(lost);
          throw lost;
        },
      ),
    ).rejects.toBe(lost);

    const finished = new FakeHost();
    await expect(
      withLease(
        undefined,
        () => Promise.resolve(finished.lease()),
        () => {
          finished.hold.lose(lost);
          return 'shipped';
        },
      ),
    ).rejects.toBe(lost);
    // A lost lock has nothing left to release.
    expect(finished.releases).toBe(0);
  });

  it('does not release a lease the callback released itself', async () => {
    const host = new FakeHost();
    await expect(
      withLease(
        undefined,
        () => Promise.resolve(host.lease()),
        async (lease) => {
          await lease.release();
          return 'early';
        },
      ),
    ).resolves.toBe('early');
    expect(host.releases).toBe(1);
  });

  it('never runs the callback when the acquire fails', async () => {
    const refused = new Error('timed out');
    let ran = false;
    await expect(
      withLease(
        HELD_KEY,
        () => Promise.reject(refused),
        () => {
          ran = true;
        },
      ),
    ).rejects.toBe(refused);
    expect(ran).toBe(false);
  });
});
