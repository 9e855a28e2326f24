import { Lease, type Hold, type LeaseHost } from '../../engine/index.js';

/**
 * A lease of one permit of a {@link PermitSemaphore}: a {@link Lease} with the permit's id.
 *
 * @example
 * ```ts
 * const lease = await locks.permitSemaphore('crawler:example.com', { permits: 4 }).acquire();
 * await jobs.enqueue({ url, permitId: lease.permitId }); // the job releases it by id when done
 * ```
 */
export class PermitLease extends Lease {
  /**
   * The permit's id: 32 hex digits, new for this acquisition. Anyone who has it can give the
   * permit back with {@link PermitSemaphore.release}, from any process (a Redisson client too,
   * with `RPermitExpirableSemaphore.release(id)`). Treat it as a secret: latchkey never puts it in
   * an error, an event or a log line.
   */
  readonly permitId: string;

  /** @internal */
  constructor(hold: Hold, host: LeaseHost) {
    super(hold, host);
    this.permitId = hold.field;
  }
}
