import type { Lease } from '../engine/index.js';
import { LockError } from '../errors.js';
import { QuorumGroup, type GroupSettings } from './quorum-group.js';

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
export interface RoundSettings extends GroupSettings {
  readonly signal: AbortSignal | undefined;
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
