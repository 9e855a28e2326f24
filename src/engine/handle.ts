import { LockReentryError } from '../errors.js';
import type { AcquireOptions } from '../options.js';
import { currentContext, newOwnerId } from '../owner.js';
import { ownerField } from '../keys.js';
import type { Engine } from './engine.js';
import type { Lease, LeaseFactory } from './lease.js';
import type { Target } from './types.js';
import { checkAcquireOptions, checkCallback, withLease, type CheckedAcquire } from './with-lock.js';

/** How a kind names its owners in Redis. @internal */
export interface OwnerPolicy {
  /**
   * Whether the async context that holds the lock may take it again. When false, taking it again
   * from inside its own `withLock` callback is refused instead of waiting for itself.
   */
  readonly reentrant: boolean;
  /** The owner's identity in Redis for one acquisition by the context `ownerId`. Secret. */
  field(clientId: string, ownerId: string): string;
}

/** Owner policies shared by every handle that names owners by async context. @internal */
export const CONTEXT_OWNERS: Readonly<Record<'reentrant' | 'exclusive', OwnerPolicy>> = Object.freeze({
  reentrant: Object.freeze({ reentrant: true, field: ownerField }),
  exclusive: Object.freeze({ reentrant: false, field: ownerField }),
});

/** What a multi-lock needs to know of a member handle, beyond its public face. @internal */
export interface HandleParts {
  /** The engine of the client that made the handle. */
  readonly engine: Engine;
  /**
   * What marks the lock as held by an async context (see `withLease`), for a lock that is not
   * reentrant; undefined for a reentrant one, whose holds Redis counts.
   */
  readonly heldKey: string | undefined;
  /** The kind's public name (`Protocol.kind`): which kinds may be members is the multi-lock's call. */
  readonly kind: string;
}

let partsOf: (handle: LockHandle<Lease>) => HandleParts;

/** See {@link HandleParts}. @internal */
export function handleParts(handle: LockHandle<Lease>): HandleParts {
  return partsOf(handle);
}

/**
 * What every kind's handle offers — `acquire`, `tryAcquire`, `withLock`, `isLocked`,
 * `remainingTtlMs`, `forceUnlock` — on top of the engine, with the owner of each call taken from
 * the async context. `L` is the kind's lease.
 */
export abstract class LockHandle<L extends Lease> {
  readonly #engine: Engine;
  readonly #target: Target;
  readonly #owners: OwnerPolicy;
  readonly #newLease: LeaseFactory<L>;

  static {
    partsOf = (handle) => ({
      engine: handle.#engine,
      heldKey: handle.#owners.reentrant ? undefined : handle.#contextKey(),
      kind: handle.#target.protocol.kind,
    });
  }

  /** @internal */
  protected constructor(engine: Engine, target: Target, owners: OwnerPolicy, newLease: LeaseFactory<L>) {
    this.#engine = engine;
    this.#target = target;
    this.#owners = owners;
    this.#newLease = newLease;
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
    return this.#owners.reentrant;
  }

  /**
   * Takes the lock, waiting up to `waitMs` (default: forever) while another owner holds it.
   * Waiting is driven by notifications, not polling.
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
  acquire(options?: AcquireOptions): Promise<L> {
    // The engine rejects with a LockTimeoutError itself when the wait runs out.
    return this.#start(options, Number.POSITIVE_INFINITY, true) as Promise<L>;
  }

  /**
   * Like `acquire`, but resolves `null` instead of throwing when the lock stays held for
   * `waitMs`, which defaults to 0 (one try).
   * @example
   * ```ts
   * const lease = await lock.tryAcquire();
   * if (lease === null) return 'busy';
   * ```
   */
  tryAcquire(options?: AcquireOptions): Promise<L | null> {
    return this.#start(options, 0, false);
  }

  /**
   * Takes the lock, runs `fn` with it, and releases it however `fn` ends. Everything `fn`
   * awaits runs as the same owner, so nested calls on a reentrant lock re-enter it.
   *
   * @returns what `fn` returns.
   * @throws a {@link LockLostError} when the lock was lost while `fn` ran (its work may not have
   *   been exclusive), with what `fn` threw, if anything, as its `cause`; otherwise what `fn`
   *   throws, or what `acquire` throws. `fn` may release the lease itself.
   * @example
   * ```ts
   * const total = await locks.lock('cart:7').withLock(async (lease) => {
   *   return recalculateCart(7, { signal: lease.signal });
   * });
   * ```
   */
  withLock<T>(fn: (lease: L) => T | PromiseLike<T>, options?: AcquireOptions): Promise<Awaited<T>> {
    try {
      checkCallback(fn);
      checkAcquireOptions(options, Number.POSITIVE_INFINITY);
    } catch (error) {
      return Promise.reject(error);
    }
    const heldKey = this.#owners.reentrant ? undefined : this.#contextKey();
    return withLease(heldKey, () => this.acquire(options), fn);
  }

  /** Whether anyone holds the lock. One round trip. */
  async isLocked(): Promise<boolean> {
    return (
      Number(await this.#engine.command(['EXISTS', this.#target.key], `reading lock "${this.name}"`)) === 1
    );
  }

  /**
   * Milliseconds until the lock expires unless renewed, `null` when nobody holds it, or
   * `Infinity` for a lock with no expiry. One round trip.
   */
  async remainingTtlMs(): Promise<number | null> {
    const reply = Number(
      await this.#engine.command(['PTTL', this.#target.key], `reading lock "${this.name}"`),
    );
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
    return this.#engine.forceUnlock(this.#target);
  }

  /** @internal The engine this handle talks to, for the kind's own methods. */
  protected get engine(): Engine {
    return this.#engine;
  }

  /**
   * @internal Whether the calling context holds this non-reentrant lock through `withLock`;
   * undefined for a reentrant lock, whose holds are counted in Redis.
   */
  protected heldByContext(): boolean | undefined {
    if (this.#owners.reentrant) return undefined;
    return currentContext()?.nonReentrant.has(this.#contextKey()) === true;
  }

  #contextKey(): string {
    return `${this.#engine.clientId}\n${this.#target.key}`;
  }

  /** Checks the options and the owner, then acquires; `throwOnTimeout`: reject rather than resolve null. */
  #start(
    options: AcquireOptions | undefined,
    defaultWaitMs: number,
    throwOnTimeout: boolean,
  ): Promise<L | null> {
    let checked: CheckedAcquire;
    let field: string;
    try {
      checked = checkAcquireOptions(options, defaultWaitMs);
      this.#engine.assertOpen();
      checked.signal?.throwIfAborted();
      const context = currentContext();
      if (this.#owners.reentrant) {
        field = this.#owners.field(this.#engine.clientId, context?.ownerId ?? newOwnerId());
      } else {
        if (context?.nonReentrant.has(this.#contextKey()) === true) {
          throw new LockReentryError(
            `Lock "${this.#target.name}" is not reentrant and is already held by this async context; taking it again would wait for itself`,
          );
        }
        field = this.#owners.field(this.#engine.clientId, newOwnerId());
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#engine.acquire(
      this.#target,
      field,
      checked.waitMs,
      checked.leaseMs,
      checked.signal,
      this.#newLease,
      throwOnTimeout,
    );
  }
}
