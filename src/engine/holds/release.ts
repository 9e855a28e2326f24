import { ReplicationError, type LockLostError, type LockLostReason } from '../../errors.js';
import { redisError, type Calls, type Synced } from '../calls.js';
import type { OperationChains } from '../chains.js';
import type { Events } from '../events.js';
import type { Telemetry } from '../telemetry.js';
import { outcomeError } from '../outcome-error.js';
import type { ScriptCall } from '../script-call.js';
import type { ReleaseOutcome } from '../types.js';
import { lostRelease, type Hold } from './hold.js';
import type { Watchdog } from './watchdog.js';

/** The parts of the engine a release works with. @internal */
export interface ReleaseParts {
  readonly calls: Calls;
  readonly chains: OperationChains;
  readonly events: Events;
  readonly watchdog: Watchdog;
  readonly telemetry: Telemetry;
  /** How long a last release is retried, in milliseconds. */
  readonly releaseRetryMs: number;
}

/** What a release needs of the holds it ends. @internal */
export interface ReleasedHolds {
  forget(hold: Hold): void;
  markLost(hold: Hold, reason: LockLostReason, message: string): LockLostError;
}

/**
 * The release of a hold: the call, tried again within its retry window while the lock is known
 * to be held, and what its reply says (counted down, freed, or lost); a last release Redis did
 * not confirm is left to expire.
 * @internal
 */
export class Releases {
  readonly #parts: ReleaseParts;
  readonly #holds: ReleasedHolds;

  constructor(parts: ReleaseParts, holds: ReleasedHolds) {
    this.#parts = parts;
    this.#holds = holds;
  }

  release(hold: Hold): Promise<void> {
    const telemetry = this.#parts.telemetry;
    if (!telemetry.enabled) return this.#release(hold);
    return telemetry.release(hold, () => this.#release(hold));
  }

  #release(hold: Hold): Promise<void> {
    if (hold.lost) {
      return Promise.reject(lostRelease(hold));
    }
    hold.releasing += 1;
    if (hold.count - hold.releasing <= 0) {
      // The last hold is going: renewal stops now, not after the reply.
      this.#parts.watchdog.untrack(hold);
    }
    // Nothing else of this owner in flight on the lock (the usual case): the call goes out at
    // once, before this returns.
    return this.#parts.chains.run(hold.chain, () => this.#releaseNow(hold));
  }

  /** One release, its first try sent now; a failed one goes on as {@link Releases.#releaseRetried}. */
  #releaseNow(hold: Hold): Promise<void> {
    if (hold.lost) {
      hold.releasing -= 1;
      return Promise.reject(lostRelease(hold));
    }
    const expected = hold.count;
    const sentAt = performance.now();
    // A repeated last release that finds the owner's field gone within the lease finds what an
    // earlier copy did: the field cannot have expired yet.
    const repeated = expected === 1 && hold.releaseUnconfirmed;
    const call = hold.target.protocol.release(hold, expected);
    const calls = this.#parts.calls;
    return calls.once(call, calls.timeoutMs).then(
      (synced) => this.#released(hold, call, expected, sentAt, repeated, synced),
      (error: unknown) => this.#releaseRetried(hold, expected, sentAt, repeated, call, error),
    );
  }

  /** A first try that failed: tried again while that is worth it, as any release call is. */
  async #releaseRetried(
    hold: Hold,
    expected: number,
    sentAt: number,
    wasRepeated: boolean,
    call: ScriptCall<ReleaseOutcome>,
    error: unknown,
  ): Promise<void> {
    let repeated = wasRepeated;
    let synced: Synced;
    try {
      synced = await this.#parts.calls.retry(
        error,
        call,
        this.#keepReleasing(hold, sentAt, () => (repeated = true)),
      );
    } catch (failure) {
      hold.releasing -= 1;
      this.#releaseFailed(hold, expected, failure);
    }
    this.#released(hold, call, expected, sentAt, repeated, synced);
  }

  /**
   * Whether a release call is worth another try: while the lock is known to be held. After
   * that it has expired anyway, and a missing field could no longer tell "released" from
   * "expired". Any try after the first is a repeat (`repeating`).
   */
  #keepReleasing(hold: Hold, sentAt: number, repeating: () => void): () => boolean {
    const retryUntil = Math.min(sentAt + this.#parts.releaseRetryMs, hold.validUntil);
    return () => {
      repeating();
      return !hold.lost && performance.now() < retryUntil;
    };
  }

  /** A release Redis did not confirm: throws what the caller sees. */
  #releaseFailed(hold: Hold, expected: number, error: unknown): never {
    if (hold.lost) {
      throw lostRelease(hold);
    }
    if (expected === 1) {
      // Unconfirmed last release: renewal is off, so the lock is gone when its lease ends.
      hold.releaseUnconfirmed = true;
      this.#holds.forget(hold);
    }
    throw redisError(error, `releasing lock "${hold.name}"`);
  }

  /**
   * What a release's reply says: the hold counted down or gone, or lost (throws). Ends the
   * release either way.
   */
  #released(
    hold: Hold,
    call: ScriptCall<ReleaseOutcome>,
    expected: number,
    sentAt: number,
    repeated: boolean,
    { reply, acknowledged }: Synced,
  ): void {
    try {
      const outcome = call.decode(reply);
      // A repeated last release that finds nothing within the lease finds what an earlier copy did.
      const replayed =
        outcome === 'absent' && repeated && expected === 1 && performance.now() < hold.validUntil;
      if ((outcome === 'absent' && !replayed) || outcome === 'changed') {
        throw outcomeError(outcome, hold.name, (message) => this.#holds.markLost(hold, 'not-owner', message));
      }
      this.#reportUnreplicated(hold, acknowledged);
      hold.count = expected - 1;
      if (hold.count === 0) {
        this.#holds.forget(hold);
      } else {
        hold.extend(sentAt);
        this.#parts.watchdog.track(hold);
      }
      if (this.#parts.events.listening('released')) {
        this.#parts.events.emit('released', { name: hold.name, key: hold.key, holdCount: hold.count });
      }
    } finally {
      hold.releasing -= 1;
    }
  }

  /**
   * With `syncReplicas`, a release (a free, or a hand-over to a waiter) that too few replicas
   * acknowledged. It cannot be undone: the caller gave the lock up, and a waiter may hold it
   * already. A failover before the replicas catch up may bring the old hold back until its lease
   * ends (the lock stays taken for nobody), or lose a hand-over (the new holder confirms its
   * grant with a WAIT of its own before it uses it). So the release resolves, and the shortfall
   * is reported on the `error` event.
   */
  #reportUnreplicated(hold: Hold, acknowledged: number): void {
    const required = this.#parts.calls.replication?.count ?? 0;
    if (acknowledged >= required) return;
    this.#parts.events.error(
      new ReplicationError(
        `Lock "${hold.name}" was released but only ${acknowledged} of the ${required} replicas required acknowledged the release in time`,
        acknowledged,
        required,
      ),
    );
  }
}
