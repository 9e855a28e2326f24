import {
  checkAcquireOptions,
  checkCallback,
  withLease,
  type CheckedAcquire,
  type Engine,
  type Lease,
} from '../../engine/index.js';
import type { AcquireOptions } from '../../options.js';
import { checkMembers, checkReentry, type Member } from './members.js';

export type { LeasesOf, MemberHandle } from './members.js';
import { MultiLease } from './multi-lease.js';
import { takeAll } from './taking.js';

/**
 * Several locks taken as one, all or nothing: Redisson's RedissonMultiLock, made of the members'
 * own locks, so a member held by anyone else (a Redisson RLock on the same key included) keeps
 * the whole multi-lock waiting. Get one from {@link LockClient.multiLock}, over handles of that
 * client: {@link Lock}, {@link FencedLock}, {@link FairLock}, {@link SimpleLock}, and the
 * {@link ReadLock} or {@link WriteLock} of a {@link ReadWriteLock} (one member per key).
 *
 * Members are taken in one order, by key, whatever order they were given in, so two multi-locks
 * that share locks never each hold what the other waits for. Members that are free are taken
 * together (one round trip when they live on one Redis node); a member that is held is waited
 * for with its own acquire, woken by its own notifications, while only the members before it
 * (by key) are held. When the wait gives up — `waitMs`, an abort, the client closing — whatever
 * was taken is released before the call returns (after an abort: within a short grace, as a
 * single lock's acquire). Each member keeps its kind's behaviour (re-entry, a fair lock's line,
 * shared readers, a fenced lease's token) and its own watchdog renewal.
 *
 * @example
 * ```ts
 * const accounts = locks.multiLock([locks.lock('account:17'), locks.lock('account:42')]);
 * await accounts.withLock(async (lease) => {
 *   await transfer(17, 42, amount, { signal: lease.signal });
 * });
 * ```
 */
export class MultiLock<L extends readonly Lease[] = readonly Lease[]> {
  readonly #engine: Engine;
  /** In the order they are taken (by key). */
  readonly #members: readonly Member[];
  readonly #names: readonly string[];
  readonly #heldKeys: readonly string[];

  /** @internal Use {@link LockClient.multiLock}; `handles` are checked here. */
  constructor(engine: Engine, handles: unknown) {
    this.#engine = engine;
    this.#members = checkMembers(engine, handles);
    const given = [...this.#members].sort((a, b) => a.index - b.index);
    this.#names = Object.freeze(given.map((member) => member.handle.name));
    this.#heldKeys = this.#members.flatMap((member) =>
      member.heldKey === undefined ? [] : [member.heldKey],
    );
  }

  /** The members' lock names, in the order their handles were given. */
  get names(): readonly string[] {
    return this.#names;
  }

  /**
   * Takes every member, waiting up to `waitMs` (default: forever) in all; `leaseMs` applies to
   * each member (counted from that member's acquisition), and without it the watchdog renews
   * each. Nothing is held when it rejects.
   *
   * @throws {@link LockTimeoutError} when `waitMs` runs out; `signal.reason` when aborted;
   *   {@link LockReentryError} for a non-reentrant member its async context already holds;
   *   {@link InvalidArgumentError} for bad options, before any Redis command; otherwise what a
   *   member's acquire threw (a {@link LockUpgradeError}, say).
   * @example
   * ```ts
   * await using lease = await accounts.acquire({ waitMs: 5_000 });
   * ```
   */
  acquire(options?: AcquireOptions): Promise<MultiLease<L>> {
    return this.#start(options, Number.POSITIVE_INFINITY, true) as Promise<MultiLease<L>>;
  }

  /**
   * Like `acquire`, but resolves `null` instead of throwing when some member stays held for
   * `waitMs`, which defaults to 0 (one try of every member, at once).
   * @example
   * ```ts
   * const lease = await accounts.tryAcquire();
   * if (lease === null) return 'busy';
   * ```
   */
  tryAcquire(options?: AcquireOptions): Promise<MultiLease<L> | null> {
    return this.#start(options, 0, false);
  }

  /**
   * Takes every member, runs `fn` with the multi-lease, and releases it however `fn` ends.
   * Everything `fn` awaits runs as the same owner: it re-enters the reentrant members, and taking
   * a non-reentrant member again from inside `fn` is refused.
   *
   * @returns what `fn` returns.
   * @throws a {@link LockLostError} when a member was lost while `fn` ran, with what `fn` threw,
   *   if anything, as its `cause`; otherwise what `fn` throws, or what `acquire` throws.
   * @example
   * ```ts
   * await accounts.withLock((lease) => transfer(17, 42, amount, { signal: lease.signal }));
   * ```
   */
  withLock<T>(
    fn: (lease: MultiLease<L>) => T | PromiseLike<T>,
    options?: AcquireOptions,
  ): Promise<Awaited<T>> {
    try {
      checkCallback(fn);
      checkAcquireOptions(options, Number.POSITIVE_INFINITY);
    } catch (error) {
      return Promise.reject(error);
    }
    return withLease(this.#heldKeys, () => this.acquire(options), fn);
  }

  /** Checks the options and the async context, then takes every member. */
  #start(
    options: AcquireOptions | undefined,
    defaultWaitMs: number,
    throwOnTimeout: boolean,
  ): Promise<MultiLease<L> | null> {
    let checked: CheckedAcquire;
    try {
      checked = checkAcquireOptions(options, defaultWaitMs);
      this.#engine.assertOpen();
      checked.signal?.throwIfAborted();
      checkReentry(this.#members);
    } catch (error) {
      return Promise.reject(error);
    }
    return takeAll(this.#members, checked, this.#engine, throwOnTimeout).then((leases) =>
      leases === null ? null : new MultiLease(leases as unknown as L),
    );
  }
}
