import { LockError, LockNotOwnedError } from '../errors.js';
import type { Hold } from './holds/hold.js';

/**
 * Makes the lease a kind hands out for one acquisition: `proof` is what the kind's script added
 * to it (a fencing token), if anything.
 * @internal
 */
export type LeaseFactory<L extends Lease> = (hold: Hold, host: LeaseHost, proof: string | undefined) => L;

/** @internal What a lease needs from its client. */
export interface LeaseHost {
  release(hold: Hold): Promise<void>;
}

/** What {@link Lease.toJSON} returns. */
export interface LeaseJSON {
  readonly name: string;
  readonly key: string;
  readonly holdCount: number;
  readonly released: boolean;
  readonly lost: boolean;
}

/**
 * One acquisition of a lock: release it once, or let `await using` release it.
 *
 * Every lease of the same owner and lock (a first acquisition and its re-entries) shares one
 * {@link Lease.signal}, which aborts with a {@link LockLostError} the moment the lock is lost.
 *
 * @example
 * ```ts
 * await using lease = await lock.acquire();
 * await chargeCard(order, { signal: lease.signal });
 * ```
 */
export class Lease implements AsyncDisposable {
  readonly #hold: Hold;
  readonly #host: LeaseHost;
  #released = false;

  /** @internal */
  constructor(hold: Hold, host: LeaseHost) {
    this.#hold = hold;
    this.#host = host;
  }

  /** The lock's name. */
  get name(): string {
    return this.#hold.name;
  }

  /** The lock's Redis key (`keyPrefix + name`). */
  get key(): string {
    return this.#hold.key;
  }

  /** Aborts with a {@link LockLostError} when the lock is lost; never aborts on release. */
  get signal(): AbortSignal {
    return this.#hold.signal;
  }

  /**
   * The owner's hold count as last confirmed by Redis (1 + re-entries still held); 0 once the
   * lock is lost, including the moment its lease ran out by this process's clock.
   */
  get holdCount(): number {
    this.#hold.verify();
    return this.#hold.lost ? 0 : this.#hold.count;
  }

  /** Whether `release()` was called on this lease. */
  get released(): boolean {
    return this.#released;
  }

  /**
   * Gives this acquisition back: the hold count goes down by one, and at 0 the lock is
   * deleted and its waiters are woken.
   * @throws {@link LockNotOwnedError} when this lease was already released or its lock lost;
   *   a {@link LockError} with code `REDIS_ERROR` when Redis could not confirm the release, in
   *   which case calling `release()` again is safe.
   */
  release(): Promise<void> {
    if (this.#released) {
      return Promise.reject(new LockNotOwnedError(`This lease of lock "${this.name}" was already released`));
    }
    this.#released = true;
    return this.#host.release(this.#hold).catch((error: unknown) => {
      // Redis could not confirm the release; the call is safe to repeat, so let the caller.
      if (error instanceof LockError && error.code === 'REDIS_ERROR') this.#released = false;
      throw error;
    });
  }

  /** What `console.log` and `util.inspect` show: the lock and the hold, never the owner's token. */
  [Symbol.for('nodejs.util.inspect.custom')](
    _depth: number,
    options: object,
    inspect: (value: unknown, options: object) => string,
  ): string {
    return `${this.constructor.name} ${inspect(this.toJSON(), options)}`;
  }

  /**
   * The lease as JSON: the lock's name and key, the hold count, whether it was released or
   * lost. Never the owner's token.
   */
  toJSON(): LeaseJSON {
    const holdCount = this.holdCount;
    return { name: this.name, key: this.key, holdCount, released: this.released, lost: this.#hold.lost };
  }

  /** Releases the lease unless `release()` was already called. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#released) await this.release();
  }
}

/** The plain {@link Lease} of a hold: one function for every handle of every kind that uses it. @internal */
export function plainLease(hold: Hold, host: LeaseHost): Lease {
  return new Lease(hold, host);
}
