import { Hold, Lease, lostRelease, type Events, type LeaseHost, type Target } from '../engine/index.js';
import { LockError, LockLostError, type LockLostReason } from '../errors.js';
import type { Lock } from '../primitives/lock/lock.js';

/** The clock drift a lease allows for: 1% of it plus 2 ms (the Redlock algorithm's figure). */
export function driftMs(ttlMs: number): number {
  return Math.floor(ttlMs * 0.01) + 2;
}

/** What one round over every master found. @internal */
export type RoundOutcome =
  | { readonly won: true; readonly lease: Lease }
  | {
      readonly won: false;
      /** Masters that granted the lock during the round (all given back since). */
      readonly granted: number;
      /** Masters that answered by the decision, granting or refusing. */
      readonly answered: number;
      /**
       * By master index, whether it refused the lock (held elsewhere). Filled in as answers come,
       * the decision's and later ones.
       */
      readonly refused: readonly boolean[];
      /** Masters that failed by the decision (unreachable, timed out, not connected). */
      readonly failed: number;
      /** The first failure of a master, for the error that says the quorum was unreachable. */
      readonly failure: unknown;
    };

/** What a round needs to know about the lock and the client. @internal */
export interface RoundSettings {
  /** The same lock on every master, in the order of the client's masters. */
  readonly locks: readonly Lock[];
  /** Whether master `index` is connected now. */
  readonly ready: (index: number) => boolean;
  readonly quorum: number;
  /** The lease each master sets: the fixed `leaseMs`, or the watchdog's timeout. */
  readonly ttlMs: number;
  /** The caller's `leaseMs`, if any: without it every master's watchdog renews its hold. */
  readonly leaseMs: number | undefined;
  readonly signal: AbortSignal | undefined;
  readonly target: Target;
  readonly events: Events;
}

/**
 * One Redlock round: asks every master for the lock at once (each call bounded by the masters'
 * command timeout), and decides as soon as a quorum granted it or can no longer be reached. The
 * round is won when a quorum granted it and time is left of the lease once the round's elapsed
 * time and the clock drift are taken off; otherwise everything granted is given back, on every
 * master at once, including grants that arrive after the decision.
 * @internal
 */
export function round(settings: RoundSettings): Promise<RoundOutcome> {
  const { locks, quorum, ttlMs, leaseMs, signal } = settings;
  const sentAt = performance.now();
  const group = new QuorumGroup(settings, sentAt);
  return new Promise<RoundOutcome>((resolve) => {
    let settled = 0;
    let answered = 0;
    let failure: unknown;
    let decided = false;
    const refused = locks.map(() => false);
    const decide = (): void => {
      if (decided) return;
      // Wait while a quorum is still possible and not yet there.
      if (group.size < quorum && group.size + (locks.length - settled) >= quorum) return;
      decided = true;
      const validityMs = ttlMs - (performance.now() - sentAt) - driftMs(ttlMs);
      if (group.size >= quorum && validityMs > 0 && signal?.aborted !== true) {
        resolve({ won: true, lease: group.win() });
      } else {
        const granted = group.size;
        group.fail();
        resolve({ won: false, granted, answered, refused, failed: settled - answered, failure });
      }
    };
    locks.forEach((lock, index) => {
      if (!settings.ready(index)) {
        // A master whose connection is down is not asked: the request would only wait for the
        // reconnect, time out, and leave a cancellation to retry against it.
        settled += 1;
        failure ??= new LockError('REDIS_ERROR', `Master ${index} is not connected`);
        return;
      }
      lock.tryAcquire({ waitMs: 0, leaseMs, signal }).then(
        (lease) => {
          settled += 1;
          answered += 1;
          if (lease === null) refused[index] = true;
          else group.add(index, lease);
          decide();
        },
        (error: unknown) => {
          settled += 1;
          failure ??= error;
          decide();
        },
      );
    });
    // The masters skipped may already have put a quorum out of reach (or every master was
    // skipped, and no reply will come to decide).
    decide();
  });
}

/**
 * The masters' leases of one Redlock acquisition. Once won, it is the state behind the
 * {@link Lease} the caller gets: a hold of its own, not registered with any master's watchdog,
 * that is lost as soon as fewer than a quorum of the masters' holds remain. Each master's engine
 * renews its hold and declares it lost when no renewal was confirmed within its lease (or the
 * master says it is gone), so the quorum is lost at the latest when the quorum-th longest
 * confirmed lease runs out, less the drift.
 * @internal
 */
class QuorumGroup implements LeaseHost {
  readonly #settings: RoundSettings;
  /** Leases by master index; removed when lost or given back. */
  readonly #leases = new Map<number, Lease>();
  readonly #listeners = new Map<number, () => void>();
  readonly #hold: Hold;
  #state: 'open' | 'won' | 'failed' | 'ended' = 'open';
  /** Leases whose release failed and may be retried by the caller. */
  #unreleased: Lease[] = [];

  constructor(settings: RoundSettings, sentAt: number) {
    this.#settings = settings;
    const { target, ttlMs, leaseMs } = settings;
    // The field is never sent anywhere: each master's lease carries its own.
    this.#hold = new Hold(target, '', ttlMs, leaseMs === undefined);
    this.#hold.extend(sentAt);
    // A check of the caller's lease checks each master's first: one past its deadline is lost
    // at once, and with too few left, so is this lease (#nodeLost runs in the same turn).
    this.#hold.onVerify = () => {
      for (const lease of [...this.#leases.values()]) isLost(lease);
    };
  }

  get size(): number {
    return this.#leases.size;
  }

  /** A master granted the lock: kept while the round is open or won, given back otherwise. */
  add(index: number, lease: Lease): void {
    if (this.#state === 'failed' || this.#state === 'ended') {
      giveBack(lease);
      return;
    }
    this.#leases.set(index, lease);
    const onLost = (): void => this.#nodeLost(index, lease);
    this.#listeners.set(index, onLost);
    lease.signal.addEventListener('abort', onLost, { once: true });
  }

  win(): Lease {
    this.#state = 'won';
    this.#hold.count = 1;
    return new Lease(this.#hold, this);
  }

  fail(): void {
    this.#state = 'failed';
    for (const lease of this.#drain()) giveBack(lease);
  }

  /** The caller's release: every master at once. */
  async release(): Promise<void> {
    if (this.#hold.lost) throw lostRelease(this.#hold);
    // A repeated call gives back only what the last one could not.
    const leases = this.#state === 'ended' ? this.#unreleased : this.#drain();
    this.#state = 'ended';
    this.#hold.count = 0;
    const results = await settleQuorum(
      leases.map((lease) => lease.release()),
      Math.min(this.#settings.quorum, leases.length),
    );
    this.#unreleased = leases.filter((_, index) => {
      const result = results[index];
      return result?.status === 'rejected' && isRedisError(result.reason);
    });
    if (leases.length > 0 && !results.some((result) => result?.status === 'fulfilled')) {
      // No master confirmed: the caller may try again; the leases run out in any case.
      const failed = results.find((result) => result?.status === 'rejected');
      throw new LockError('REDIS_ERROR', `No master confirmed the release of lock "${this.#hold.name}"`, {
        cause: failed?.status === 'rejected' ? failed.reason : undefined,
      });
    }
    const events = this.#settings.events;
    if (events.listening('released')) {
      events.emit('released', { name: this.#hold.name, key: this.#hold.key, holdCount: 0 });
    }
  }

  /**
   * A master's hold was lost (not confirmed in time, gone from the master, or its engine closed):
   * with fewer than a quorum left, the lock is lost.
   */
  #nodeLost(index: number, lease: Lease): void {
    if (this.#leases.get(index) !== lease) return;
    this.#leases.delete(index);
    this.#listeners.delete(index);
    if (this.#state !== 'won' || this.#leases.size >= this.#settings.quorum) return;
    const cause: unknown = lease.signal.reason;
    const reason: LockLostReason = cause instanceof LockLostError ? cause.reason : 'expired';
    const message = `Lock "${this.#hold.name}" was lost: fewer than ${this.#settings.quorum} masters still confirm it`;
    const error = new LockLostError(message, reason, { cause });
    this.#state = 'ended';
    this.#hold.lose(error);
    for (const rest of this.#drain()) giveBack(rest);
    this.#settings.events.emit('lockLost', { name: this.#hold.name, key: this.#hold.key, error });
  }

  /** Takes every lease out of the group and stops listening for their loss. */
  #drain(): Lease[] {
    const leases: Lease[] = [];
    for (const [index, lease] of this.#leases) {
      const onLost = this.#listeners.get(index);
      if (onLost !== undefined) lease.signal.removeEventListener('abort', onLost);
      leases.push(lease);
    }
    this.#leases.clear();
    this.#listeners.clear();
    return leases;
  }
}

/** Whether a lease is lost; reading its signal declares it lost if it is past its deadline. */
function isLost(lease: Lease): boolean {
  return lease.signal.aborted;
}

/**
 * Waits until `quorum` of `calls` succeeded or every call settled, whichever comes first; the
 * rest go on (a master that is down is retried by its engine while its lease lasts). An entry
 * is undefined for a call still under way.
 */
function settleQuorum(
  calls: readonly Promise<void>[],
  quorum: number,
): Promise<(PromiseSettledResult<void> | undefined)[]> {
  const results: (PromiseSettledResult<void> | undefined)[] = calls.map(() => undefined);
  return new Promise((resolve) => {
    let settled = 0;
    let succeeded = 0;
    if (calls.length === 0) resolve(results);
    calls.forEach((call, index) => {
      call
        .then(
          () => {
            results[index] = { status: 'fulfilled', value: undefined };
            succeeded += 1;
          },
          (reason: unknown) => {
            results[index] = { status: 'rejected', reason };
          },
        )
        .finally(() => {
          settled += 1;
          if (succeeded >= quorum || settled === calls.length) resolve([...results]);
        })
        .catch(() => undefined);
    });
  });
}

function isRedisError(error: unknown): boolean {
  return error instanceof LockError && error.code === 'REDIS_ERROR';
}

/** Gives a master's lease back in the background: its engine retries, and its TTL bounds it. */
function giveBack(lease: Lease): void {
  if (!lease.released) lease.release().catch(() => undefined);
}
