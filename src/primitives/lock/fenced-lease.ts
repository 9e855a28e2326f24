import { Lease, type Hold, type LeaseHost, type LeaseJSON } from '../../engine/index.js';

/**
 * A lease of a {@link FencedLock}: a {@link Lease} with the fencing token of its acquisition.
 *
 * @example
 * ```ts
 * await using lease = await locks.fencedLock('ledger:7').acquire();
 * await ledger.write(entry, { fencingToken: lease.token });
 * ```
 */
export class FencedLease extends Lease {
  /**
   * The fencing token of this acquisition: larger than that of every acquisition of the lock
   * before it, re-entries included. Hand it to the resource the lock guards with every write,
   * and let the resource refuse a token smaller than the largest it has seen: a holder that
   * lost the lock while paused is then refused, whatever it believes.
   */
  readonly token: bigint;

  /** @internal */
  constructor(hold: Hold, host: LeaseHost, token: bigint) {
    super(hold, host);
    this.token = token;
  }

  /** {@link Lease.toJSON} with the fencing token, as a decimal string (JSON has no bigint). */
  override toJSON(): LeaseJSON & { readonly token: string } {
    return { ...super.toJSON(), token: this.token.toString() };
  }
}
