/**
 * `withLock` for every kind: a loss while the callback runs is reported as the LockLostError,
 * even when the callback's own work failed first with the AbortError of `lease.signal` (the
 * pattern the README advises), and a callback may release its lease itself without making
 * `withLock` fail.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { LockLostError } from '../../src/index.js';
import { KINDS } from '../support/kinds.js';
import { sharedSuite } from '../support/shared-suite.js';
import { settle } from '../support/wait.js';

describe.each(KINDS)('withLock ($name)', (kind) => {
  const { lockClient } = sharedSuite(`with-lock-${kind.name}`);

  it('rejects with the LockLostError, the AbortError of the work as its cause, when the lock is lost', async () => {
    const lock = kind.handle(lockClient(), 'orders:export');
    const outcome = await settle(
      lock.withLock(async (lease) => {
        // Work that honours the lease's signal, as the README advises: it fails with the
        // signal's AbortError-style rejection the moment the lock is lost.
        const work = delay(5_000, undefined, { signal: lease.signal });
        setTimeout(() => void lock.forceUnlock(), 50);
        await work;
      }),
    );
    expect(outcome.error).toBeInstanceOf(LockLostError);
    const lost = outcome.error as LockLostError;
    expect(lost.reason).toBe('force-unlocked');
    expect(lost.cause).toBeInstanceOf(Error);
    expect((lost.cause as Error).name).toBe('AbortError');
    expect(await lock.isLocked()).toBe(false);
  });

  it("keeps the callback's own error when the lock was not lost", async () => {
    const lock = kind.handle(lockClient(), 'orders:import');
    const failure = new Error('the import file is malformed');
    const outcome = await settle(
      lock.withLock(() => {
        throw failure;
      }),
    );
    expect(outcome.error).toBe(failure);
    expect(await lock.isLocked()).toBe(false);
  });

  it('succeeds when the callback released its lease itself', async () => {
    const lock = kind.handle(lockClient(), 'orders:archive');
    const value = await lock.withLock(async (lease) => {
      await lease.release();
      expect(await lock.isLocked()).toBe(false);
      return 'archived';
    });
    expect(value).toBe('archived');
    // And when it released it and then failed: the failure, not a release error.
    const failure = new Error('archive store is full');
    const outcome = await settle(
      lock.withLock(async (lease) => {
        await lease.release();
        throw failure;
      }),
    );
    expect(outcome.error).toBe(failure);
  });
});
