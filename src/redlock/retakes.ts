import type { Lease } from '../engine/index.js';
import type { Lock } from '../primitives/lock/lock.js';

/** What {@link Retakes} works with. @internal */
export interface RetakeHost {
  /** The same lock on every master, in the order of the client's masters. */
  readonly locks: readonly Lock[];
  /** Whether master `index` is connected now. */
  readonly ready: (index: number) => boolean;
  /**
   * Whether the lease still holds a quorum, its masters' deadlines checked by the clock first:
   * after a stall the masters it held may have lapsed before their expiry timers ran.
   */
  readonly held: () => boolean;
  /** Whether the lease holds master `index` now. */
  readonly holds: (index: number) => boolean;
  /** A master granted the lock again; the host keeps the lease or gives it back. */
  readonly add: (index: number, lease: Lease) => void;
}

/**
 * Asks the masters a won Redlock lease does not hold — whose hold lapsed (late replies, a
 * freeze, a restart) or that missed the round — for the lock again, once per period while the
 * lease lasts, so a long-held lease does not erode toward its quorum. It is safe while the lease
 * still holds a quorum: nobody else can hold one then, and a master held by another client's
 * failed round only refuses. One ask per master at a time, each bounded by the masters' command
 * timeout, so a frozen master is sent one request (and its cancellation) per period.
 * @internal
 */
export class Retakes {
  readonly #host: RetakeHost;
  readonly #periodMs: number;
  readonly #asking = new Set<number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(host: RetakeHost, periodMs: number) {
    this.#host = host;
    this.#periodMs = periodMs;
  }

  /** Starts asking, if it is not already. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.#askMissing(), this.#periodMs);
    this.#timer.unref();
  }

  /** Stops asking; a grant already on its way goes to the host, which gives it back. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #askMissing(): void {
    const host = this.#host;
    // Only a lease that holds a quorum may ask: nobody else can hold one then.
    if (!host.held()) return;
    host.locks.forEach((lock, index) => {
      if (host.holds(index) || this.#asking.has(index) || !host.ready(index)) return;
      this.#asking.add(index);
      const asked = (): void => {
        this.#asking.delete(index);
      };
      lock.tryAcquire({ waitMs: 0 }).then(
        (lease) => {
          asked();
          if (lease !== null) host.add(index, lease);
        },
        // Down, frozen or slow: asked again next period.
        asked,
      );
    });
  }
}
