import { Hold, Lease, lostRelease, type Events, type LeaseHost, type Target } from '../engine/index.js';
import { LockError, LockLostError, type LockLostReason } from '../errors.js';
import type { Lock } from '../primitives/lock/lock.js';
import { Retakes } from './retakes.js';

/** What the masters' leases of one acquisition need to know about the lock and the client. @internal */
export interface GroupSettings {
  /** The same lock on every master, in the order of the client's masters. */
  readonly locks: readonly Lock[];
  /** Whether master `index` is connected now. */
  readonly ready: (index: number) => boolean;
  readonly quorum: number;
  /** The lease each master sets: the fixed `leaseMs`, or the watchdog's timeout. */
  readonly ttlMs: number;
  /** The caller's `leaseMs`, if any: without it every master's watchdog renews its hold. */
  readonly leaseMs: number | undefined;
  readonly target: Target;
  readonly events: Events;
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
export class QuorumGroup implements LeaseHost {
  readonly #settings: GroupSettings;
  /** Leases by master index; removed when lost or given back. */
  readonly #leases = new Map<number, Lease>();
  readonly #listeners = new Map<number, () => void>();
  readonly #hold: Hold;
  /** Asks masters the won lease lost or never had for it again; made when first needed. */
  #retakes: Retakes | undefined;
  #state: 'open' | 'won' | 'failed' | 'ended' = 'open';
  /** Leases whose release failed and may be retried by the caller. */
  #unreleased: Lease[] = [];

  constructor(settings: GroupSettings, sentAt: number) {
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
    if (this.#leases.size < this.#settings.locks.length) this.#startRetakes();
    return new Lease(this.#hold, this);
  }

  fail(): void {
    this.#state = 'failed';
    this.#retakes?.stop();
    for (const lease of this.#drain()) giveBack(lease);
  }

  /** The caller's release: every master at once. */
  async release(): Promise<void> {
    if (this.#hold.lost) throw lostRelease(this.#hold);
    // A repeated call gives back only what the last one could not.
    const leases = this.#state === 'ended' ? this.#unreleased : this.#drain();
    this.#state = 'ended';
    this.#retakes?.stop();
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
    if (this.#state !== 'won') return;
    if (this.#leases.size >= this.#settings.quorum) {
      this.#startRetakes();
      return;
    }
    const cause: unknown = lease.signal.reason;
    const reason: LockLostReason = cause instanceof LockLostError ? cause.reason : 'expired';
    const message = `Lock "${this.#hold.name}" was lost: fewer than ${this.#settings.quorum} masters still confirm it`;
    const error = new LockLostError(message, reason, { cause });
    this.#state = 'ended';
    this.#retakes?.stop();
    this.#hold.lose(error);
    for (const rest of this.#drain()) giveBack(rest);
    this.#settings.events.emit('lockLost', { name: this.#hold.name, key: this.#hold.key, error });
  }

  /**
   * Starts asking the masters the won lease does not hold. Not for a fixed `leaseMs`: that lease
   * ends when its time is up, and a master taken again later would outlast the rest.
   */
  #startRetakes(): void {
    const { locks, ready, ttlMs, leaseMs } = this.#settings;
    if (leaseMs !== undefined) return;
    this.#retakes ??= new Retakes(
      {
        locks,
        ready,
        held: () => {
          this.#hold.verify();
          return this.#state === 'won';
        },
        holds: (index) => this.#leases.has(index),
        add: (index, lease) => this.add(index, lease),
      },
      Math.max(1, Math.floor(ttlMs / 3)),
    );
    this.#retakes.start();
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
