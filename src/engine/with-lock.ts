import { InvalidArgumentError, LockLostError } from '../errors.js';
import { currentContext, newOwnerId, runInContext, type OwnerContext } from '../owner.js';
import { checkDuration, checkOptions, checkSignal, checkWait, describe } from '../validate.js';

/** What `withLock` needs of a lease: a lock's {@link Lease}, or a lease of several locks. @internal */
export interface HeldLease {
  readonly released: boolean;
  readonly signal: AbortSignal;
  release(): Promise<void>;
}

const ACQUIRE_OPTIONS = ['waitMs', 'leaseMs', 'signal'] as const;

/** An acquire's options, checked. @internal */
export interface CheckedAcquire {
  readonly waitMs: number;
  readonly leaseMs: number | undefined;
  readonly signal: AbortSignal | undefined;
}

/**
 * Checks `acquire`'s options before anything is sent: `waitMs` defaults to `defaultWaitMs`;
 * `checkLease` adds a kind's own bound on `leaseMs` (Redlock's: far above the node timeout).
 * @internal
 */
export function checkAcquireOptions(
  options: unknown,
  defaultWaitMs: number,
  checkLease?: (leaseMs: number) => void,
): CheckedAcquire {
  const given = checkOptions('options', options, ACQUIRE_OPTIONS);
  const leaseMs = given.leaseMs === undefined ? undefined : checkDuration('leaseMs', given.leaseMs, 1);
  if (leaseMs !== undefined) checkLease?.(leaseMs);
  return {
    waitMs: given.waitMs === undefined ? defaultWaitMs : checkWait('waitMs', given.waitMs),
    leaseMs,
    signal: checkSignal('signal', given.signal),
  };
}

/** `withLock`'s callback, checked. @internal */
export function checkCallback(fn: unknown): asserts fn is (...args: never[]) => unknown {
  if (typeof fn !== 'function') {
    throw new InvalidArgumentError(`Expected \`fn\` to be a function, got ${describe(fn)}`);
  }
}

/**
 * What `withLock` rejects with when its callback threw: the lease's {@link LockLostError} if the
 * lock was lost meanwhile — whatever the callback threw then (typically the `AbortError` of
 * work that was given `lease.signal`) is its `cause` — and otherwise the callback's error.
 */
function lostInstead(lease: HeldLease, error: unknown): unknown {
  const lost: unknown = lease.signal.aborted ? lease.signal.reason : undefined;
  if (!(lost instanceof LockLostError) || error === lost) return error;
  return new LockLostError(lost.message, lost.reason, { cause: error });
}

/**
 * The body of every kind's `withLock`. Takes the lease with `acquire`, run in the caller's async
 * context (or a new one: the callback's owner), then runs `fn` with it in that context, with
 * `heldKey` (or each of several) added to the locks it holds without re-entry (undefined: a
 * reentrant lock, whose holds Redis counts), so that taking that lock again from inside `fn` is
 * refused while side-by-side callbacks still exclude each other. Releases the lease however `fn` ends. Rejects
 * with the lease's {@link LockLostError} when the lock was lost while `fn` ran (what `fn` threw,
 * if anything, is its `cause`), otherwise with what `fn` or `acquire` threw. `fn` may release
 * the lease itself.
 * @internal
 */
export function withLease<L extends HeldLease, T>(
  heldKey: string | readonly string[] | undefined,
  acquire: () => Promise<L>,
  fn: (lease: L) => T | PromiseLike<T>,
): Promise<Awaited<T>> {
  const outer: OwnerContext = currentContext() ?? { ownerId: newOwnerId(), nonReentrant: new Set() };
  const held = typeof heldKey === 'string' ? [heldKey] : (heldKey ?? []);
  const inner: OwnerContext =
    held.length === 0
      ? outer
      : { ownerId: outer.ownerId, nonReentrant: new Set([...outer.nonReentrant, ...held]) };
  return runInContext(outer, async (): Promise<Awaited<T>> => {
    const lease = await acquire();
    let result: Awaited<T>;
    try {
      result = await runInContext(inner, async () => await fn(lease));
    } catch (error) {
      if (!lease.released) await lease.release().catch(() => undefined);
      throw lostInstead(lease, error);
    }
    if (lease.signal.aborted) throw lease.signal.reason;
    // The callback may have released the lease itself; its work still succeeded.
    if (!lease.released) await lease.release();
    return result;
  });
}
