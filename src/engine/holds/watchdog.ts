import type { Hold } from './hold.js';

/** @internal */
export interface WatchdogHost {
  /**
   * Renews one batch. Resolves false when the call failed in a way worth retrying soon; never
   * rejects.
   */
  renew(holds: readonly Hold[]): Promise<boolean>;
  /** The hold's deadline passed without a confirmed renewal. Never throws. */
  expire(hold: Hold): void;
}

/**
 * Keeps held locks alive: one renewal timer and one expiry timer per client, not per lock.
 * Renewals of many locks go out together, in batches of up to `batchSize` keys per call (on a
 * Redis Cluster, per slot).
 * @internal
 */
export class Watchdog {
  readonly #host: WatchdogHost;
  readonly #intervalMs: number;
  readonly #batchSize: number;
  /** Holds renewed by the watchdog. */
  readonly #renewed = new Set<Hold>();
  /** Every hold with a deadline, renewed or not. */
  readonly #tracked = new Set<Hold>();
  #renewTimer: NodeJS.Timeout | undefined;
  #renewing = false;
  #expiryTimer: NodeJS.Timeout | undefined;
  #expiryAt = Number.POSITIVE_INFINITY;
  #stopped = false;

  /**
   * On a Redis Cluster, the slot of a hold's keys: a batch never mixes slots (a script's keys
   * must share one). Undefined on one server: batches take any holds.
   */
  readonly #groupOf: ((hold: Hold) => number) | undefined;

  constructor(host: WatchdogHost, intervalMs: number, batchSize: number, groupOf?: (hold: Hold) => number) {
    this.#host = host;
    this.#intervalMs = intervalMs;
    this.#batchSize = batchSize;
    this.#groupOf = groupOf;
  }

  track(hold: Hold): void {
    if (this.#stopped) return;
    this.#tracked.add(hold);
    if (hold.watchdog) {
      this.#renewed.add(hold);
      if (this.#renewTimer === undefined && !this.#renewing) this.#scheduleRenewal(this.#intervalMs);
    }
    this.#scheduleExpiry(hold.deadline);
  }

  /**
   * Stops renewing a hold, synchronously: no renewal of it is sent after this returns. The
   * timers stay armed (they are unref'd) and find nothing to do if no hold is left: a client
   * that takes and releases locks in a loop does not re-arm them every time.
   */
  untrack(hold: Hold): void {
    this.#tracked.delete(hold);
    this.#renewed.delete(hold);
  }

  /** Called after a hold's deadline moved earlier than planned (never in practice) or later. */
  touched(hold: Hold): void {
    if (this.#tracked.has(hold)) this.#scheduleExpiry(hold.deadline);
  }

  /** Delay before retrying after a failed renewal call: soon, yet never a busy loop. */
  get retryDelayMs(): number {
    return Math.min(this.#intervalMs, Math.max(50, Math.min(1_000, this.#intervalMs / 4)));
  }

  stop(): void {
    this.#stopped = true;
    if (this.#renewTimer !== undefined) clearTimeout(this.#renewTimer);
    if (this.#expiryTimer !== undefined) clearTimeout(this.#expiryTimer);
    this.#renewTimer = undefined;
    this.#expiryTimer = undefined;
    this.#renewed.clear();
    this.#tracked.clear();
  }

  #scheduleRenewal(delayMs: number): void {
    if (this.#stopped || this.#renewed.size === 0) return;
    this.#renewTimer = setTimeout(() => {
      this.#renewTimer = undefined;
      void this.#renewAll();
    }, delayMs);
    this.#renewTimer.unref();
  }

  async #renewAll(): Promise<void> {
    this.#sweep();
    const holds = [...this.#renewed];
    if (holds.length === 0) return;
    this.#renewing = true;
    let allRenewed = true;
    try {
      const batches: Promise<boolean>[] = [];
      for (const group of this.#groups(holds)) {
        for (let i = 0; i < group.length; i += this.#batchSize) {
          batches.push(this.#host.renew(group.slice(i, i + this.#batchSize)));
        }
      }
      for (const ok of await Promise.all(batches)) allRenewed &&= ok;
    } finally {
      this.#renewing = false;
    }
    // A failed call is retried sooner, while the leases it was renewing are still valid.
    this.#scheduleRenewal(allRenewed ? this.#intervalMs : this.retryDelayMs);
  }

  /** The holds in groups that may share a batch: all together, or one group per slot. */
  #groups(holds: Hold[]): Iterable<Hold[]> {
    const groupOf = this.#groupOf;
    if (groupOf === undefined) return [holds];
    const bySlot = new Map<number, Hold[]>();
    for (const hold of holds) {
      const slot = groupOf(hold);
      const group = bySlot.get(slot);
      if (group === undefined) bySlot.set(slot, [hold]);
      else group.push(hold);
    }
    return bySlot.values();
  }

  #scheduleExpiry(at: number): void {
    if (this.#stopped || at >= this.#expiryAt) return;
    if (this.#expiryTimer !== undefined) clearTimeout(this.#expiryTimer);
    this.#expiryAt = at;
    this.#expiryTimer = setTimeout(
      () => {
        this.#expiryTimer = undefined;
        this.#expiryAt = Number.POSITIVE_INFINITY;
        this.#sweep();
      },
      Math.max(0, at - performance.now()),
    );
    this.#expiryTimer.unref();
  }

  /** Declares every hold past its deadline lost, then plans the next check. */
  #sweep(): void {
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    for (const hold of [...this.#tracked]) {
      if (hold.deadline <= now) {
        this.untrack(hold);
        this.#host.expire(hold);
      } else {
        next = Math.min(next, hold.deadline);
      }
    }
    if (next !== Number.POSITIVE_INFINITY) this.#scheduleExpiry(next);
  }
}
