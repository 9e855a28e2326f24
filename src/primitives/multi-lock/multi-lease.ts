import { unwatchAbort, verifiedOnRead, watchAbort, type Lease, type LeaseJSON } from '../../engine/index.js';
import { LockError, LockNotOwnedError } from '../../errors.js';

/** What {@link MultiLease.toJSON} returns. */
export interface MultiLeaseJSON {
  readonly released: boolean;
  readonly lost: boolean;
  readonly leases: readonly LeaseJSON[];
}

/**
 * One acquisition of every lock of a {@link MultiLock}: release it once, or let `await using`
 * release it. {@link MultiLease.leases} are the members' own leases, in the order the handles
 * were given: each keeps its kind's meaning (a {@link FencedLease}'s token, say) and is renewed by
 * the watchdog as any lease of its kind.
 *
 * @example
 * ```ts
 * await using lease = await locks.multiLock([locks.lock('account:1'), locks.lock('account:2')]).acquire();
 * await transfer(1, 2, amount, { signal: lease.signal });
 * ```
 */
export class MultiLease<L extends readonly Lease[] = readonly Lease[]> implements AsyncDisposable {
  /** The members' leases, in the order their handles were given to `multiLock()`. */
  readonly leases: L;
  readonly #controller = new AbortController();
  readonly #onLoss: Array<() => void> = [];
  #released = false;

  /** @internal Made by {@link MultiLock}. */
  constructor(leases: L) {
    this.leases = leases;
    for (const lease of leases) {
      const signal = lease.signal;
      if (signal.aborted) {
        this.#controller.abort(signal.reason);
        break;
      }
      // One listener per signal, however many multi-leases share a reentrant member's.
      const onLoss = { handleEvent: (): void => this.#controller.abort(signal.reason) };
      watchAbort(signal, onLoss);
      this.#onLoss.push(() => unwatchAbort(signal, onLoss));
    }
    // Every read of the signal reads the members' signals first, which check their holds against
    // their deadlines: a member past its lease aborts, and this signal with it, before the read
    // returns.
    verifiedOnRead(this.#controller.signal, {
      verify: () => {
        for (const lease of this.leases) {
          if (lease.signal.aborted) return;
        }
      },
    });
  }

  /**
   * Aborts when any member is lost, with that member's {@link LockLostError}; never aborts on
   * release. Reading it checks every member, so it reports a loss from the moment a member's
   * lease ran out by this process's clock.
   */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Whether `release()` was called on this lease (and did not fail for want of Redis). */
  get released(): boolean {
    return this.#released;
  }

  /**
   * Gives back every member not released yet, all at once (a member whose lease was released on
   * its own is left alone).
   * @throws {@link LockNotOwnedError} when this lease was already released, or, once every other
   *   member is released, the first error of a member's release in the order given (a lost
   *   member's {@link LockNotOwnedError}, or a {@link LockError} `REDIS_ERROR` when Redis could
   *   not confirm it: then calling `release()` again releases what is left).
   */
  release(): Promise<void> {
    if (this.#released) {
      return Promise.reject(new LockNotOwnedError('This multi-lease was already released'));
    }
    this.#released = true;
    return this.#releaseMembers();
  }

  async #releaseMembers(): Promise<void> {
    const results = await Promise.allSettled(
      this.leases.map((lease) => (lease.released ? Promise.resolve() : lease.release())),
    );
    const failed = results.find((result) => result.status === 'rejected');
    // Redis could not confirm some release; those members are safe to release again.
    const unconfirmed = results.some(
      (result) =>
        result.status === 'rejected' &&
        result.reason instanceof LockError &&
        result.reason.code === 'REDIS_ERROR',
    );
    if (unconfirmed) this.#released = false;
    else for (const stop of this.#onLoss.splice(0)) stop();
    if (failed !== undefined) throw failed.reason;
  }

  /** What `console.log` and `util.inspect` show: the members' leases, never an owner's token. */
  [Symbol.for('nodejs.util.inspect.custom')](
    _depth: number,
    options: object,
    inspect: (value: unknown, options: object) => string,
  ): string {
    return `MultiLease ${inspect(this.toJSON(), options)}`;
  }

  /** Whether it was released and whether a member was lost, and each member's lease as JSON. */
  toJSON(): MultiLeaseJSON {
    const leases = this.leases.map((lease) => lease.toJSON());
    return { released: this.released, lost: leases.some((lease) => lease.lost), leases };
  }

  /** Releases the lease unless `release()` was already called. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#released) await this.release();
  }
}
