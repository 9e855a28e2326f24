import { InvalidArgumentError, LockReentryError, LockTimeoutError } from '../errors.js';
import type { Hold } from '../hold.js';
import { ownerField } from '../keys.js';
import type { Lease } from '../lease.js';
import type { AcquireOptions, LockedCallback } from '../options.js';
import { currentContext, newOwnerId, runInContext, type OwnerContext } from '../owner.js';
import { checkDuration, checkOptions, checkSignal, checkWait, describe } from '../validate.js';

/** @internal Which lock a {@link Lock} handle is about. */
export interface LockTarget {
  readonly name: string;
  readonly key: string;
  readonly channel: string;
  readonly reentrant: boolean;
}

/** @internal What a {@link Lock} needs from its {@link LockClient}. */
export interface LockCore {
  readonly clientId: string;
  assertOpen(): void;
  acquire(
    target: LockTarget,
    field: string,
    waitMs: number,
    leaseMs: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Lease | null>;
  release(hold: Hold): Promise<void>;
  command(args: string[], doing: string): Promise<unknown>;
  forceUnlock(target: LockTarget): Promise<boolean>;
}

const ACQUIRE_OPTIONS = ['waitMs', 'leaseMs', 'signal'] as const;

interface CheckedAcquire {
  readonly waitMs: number;
  readonly leaseMs: number | undefined;
  readonly signal: AbortSignal | undefined;
}

function checkAcquireOptions(options: unknown, defaultWaitMs: number): CheckedAcquire {
  const given = checkOptions('options', options, ACQUIRE_OPTIONS);
  return {
    waitMs: given.waitMs === undefined ? defaultWaitMs : checkWait('waitMs', given.waitMs),
    leaseMs: given.leaseMs === undefined ? undefined : checkDuration('leaseMs', given.leaseMs, 1),
    signal: checkSignal('signal', given.signal),
  };
}

/**
 * A distributed lock, reentrant by default, stored as Redisson's RLock stores it: a hash
 * `owner -> hold count` whose PTTL is the lease. Get one from {@link LockClient.lock}.
 *
 * The owner is the async context: everything awaited inside a {@link Lock.withLock} callback
 * shares it, so nested code re-enters the lock instead of waiting for itself. An acquisition
 * outside any `withLock` callback gets an owner of its own.
 *
 * @example
 * ```ts
 * const lock = locks.lock('invoice:42');
 * await lock.withLock(async (lease) => {
 *   await sendInvoice(42, { signal: lease.signal });
 * });
 * ```
 */
export class Lock {
  readonly #core: LockCore;
  readonly #target: LockTarget;

  /** @internal Use {@link LockClient.lock}. */
  constructor(core: LockCore, target: LockTarget) {
    this.#core = core;
    this.#target = target;
  }

  /** The lock's name. */
  get name(): string {
    return this.#target.name;
  }

  /** The lock's Redis key (`keyPrefix + name`). */
  get key(): string {
    return this.#target.key;
  }

  /** Whether the lock can be re-entered by the async context that holds it. */
  get reentrant(): boolean {
    return this.#target.reentrant;
  }

  /**
   * Takes the lock, waiting up to `waitMs` (default: forever) while another owner holds it.
   * Waiting is driven by unlock notifications, not polling.
   *
   * @throws {@link LockTimeoutError} when `waitMs` runs out; `signal.reason` when aborted;
   *   {@link LockReentryError} for a non-reentrant lock its context already holds;
   *   {@link InvalidArgumentError} for bad options, before any Redis command.
   * @example
   * ```ts
   * const lease = await lock.acquire({ waitMs: 5_000 });
   * try {
   *   await shipOrder(order);
   * } finally {
   *   await lease.release();
   * }
   * ```
   */
  acquire(options?: AcquireOptions): Promise<Lease> {
    return this.#start(options, Number.POSITIVE_INFINITY, (started) =>
      started.then((lease) => {
        if (lease !== null) return lease;
        throw new LockTimeoutError(`Timed out waiting for lock "${this.#target.name}"`);
      }),
    );
  }

  /**
   * Like {@link Lock.acquire}, but resolves `null` instead of throwing when the lock stays
   * held for `waitMs`, which defaults to 0 (one try).
   * @example
   * ```ts
   * const lease = await lock.tryAcquire();
   * if (lease === null) return 'busy';
   * ```
   */
  tryAcquire(options?: AcquireOptions): Promise<Lease | null> {
    return this.#start(options, 0, (started) => started);
  }

  /**
   * Takes the lock, runs `fn` with it, and releases it however `fn` ends. Everything `fn`
   * awaits runs as the same owner, so nested `withLock`/`acquire` calls on this lock re-enter.
   *
   * @returns what `fn` returns.
   * @throws what `fn` throws; otherwise a {@link LockLostError} when the lock was lost while
   *   `fn` ran (its work may not have been exclusive), or what `acquire` throws.
   * @example
   * ```ts
   * const total = await locks.lock('cart:7').withLock(async (lease) => {
   *   return recalculateCart(7, { signal: lease.signal });
   * });
   * ```
   */
  withLock<T>(fn: LockedCallback<T>, options?: AcquireOptions): Promise<Awaited<T>> {
    if (typeof fn !== 'function') {
      return Promise.reject(
        new InvalidArgumentError(`Expected \`fn\` to be a function, got ${describe(fn)}`),
      );
    }
    try {
      checkAcquireOptions(options, Number.POSITIVE_INFINITY);
    } catch (error) {
      return Promise.reject(error);
    }
    const parent = currentContext();
    const context: OwnerContext = parent ?? { ownerId: newOwnerId(), nonReentrant: new Set() };
    return runInContext(context, async (): Promise<Awaited<T>> => {
      const lease = await this.acquire(options);
      // A non-reentrant lock is recorded in the context the callback runs in, so re-entry
      // from inside it is rejected while side-by-side callbacks still exclude each other.
      const inner: OwnerContext = this.#target.reentrant
        ? context
        : { ownerId: context.ownerId, nonReentrant: new Set([...context.nonReentrant, this.#contextKey()]) };
      let result: Awaited<T>;
      try {
        result = await runInContext(inner, async () => await fn(lease));
      } catch (error) {
        await lease.release().catch(() => undefined);
        throw error;
      }
      if (lease.signal.aborted) throw lease.signal.reason;
      await lease.release();
      return result;
    });
  }

  /** Whether anyone holds the lock. One round trip. */
  async isLocked(): Promise<boolean> {
    return (
      Number(await this.#core.command(['EXISTS', this.#target.key], `reading lock "${this.name}"`)) === 1
    );
  }

  /**
   * How many times the calling async context holds the lock (0 when it does not). One round
   * trip for a reentrant lock; for a non-reentrant one, 1 or 0 from this client's own state.
   */
  async holdCount(): Promise<number> {
    this.#core.assertOpen();
    const context = currentContext();
    if (context === undefined) return 0;
    if (!this.#target.reentrant) return context.nonReentrant.has(this.#contextKey()) ? 1 : 0;
    const field = ownerField(this.#core.clientId, context.ownerId);
    const reply = await this.#core.command(['HGET', this.#target.key, field], `reading lock "${this.name}"`);
    return reply === null || reply === undefined ? 0 : Number(reply);
  }

  /**
   * Milliseconds until the lock expires unless renewed, `null` when nobody holds it, or
   * `Infinity` for a lock with no expiry. One round trip.
   */
  async remainingTtlMs(): Promise<number | null> {
    const reply = Number(await this.#core.command(['PTTL', this.#target.key], `reading lock "${this.name}"`));
    if (reply === -2) return null;
    if (reply === -1) return Number.POSITIVE_INFINITY;
    return reply;
  }

  /**
   * Deletes the lock whoever holds it and wakes its waiters. Holders in this client are told
   * at once (their signals abort with reason `force-unlocked`); holders elsewhere at their next
   * renewal. Meant for operators and tests, not for normal release.
   * @returns whether there was a lock to delete.
   */
  forceUnlock(): Promise<boolean> {
    return this.#core.forceUnlock(this.#target);
  }

  #contextKey(): string {
    return `${this.#core.clientId}\n${this.#target.key}`;
  }

  #start<R>(
    options: AcquireOptions | undefined,
    defaultWaitMs: number,
    finish: (started: Promise<Lease | null>) => Promise<R>,
  ): Promise<R> {
    let checked: CheckedAcquire;
    let field: string;
    try {
      checked = checkAcquireOptions(options, defaultWaitMs);
      this.#core.assertOpen();
      checked.signal?.throwIfAborted();
      const context = currentContext();
      if (this.#target.reentrant) {
        field = ownerField(this.#core.clientId, context?.ownerId ?? newOwnerId());
      } else {
        if (context?.nonReentrant.has(this.#contextKey()) === true) {
          throw new LockReentryError(
            `Lock "${this.#target.name}" is not reentrant and is already held by this async context; taking it again would wait for itself`,
          );
        }
        field = ownerField(this.#core.clientId, newOwnerId());
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return finish(this.#core.acquire(this.#target, field, checked.waitMs, checked.leaseMs, checked.signal));
  }
}
