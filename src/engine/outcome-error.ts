import { LockError, LockLostError, LockNotOwnedError } from '../errors.js';
import type { AcquireOutcome, ReleaseOutcome } from './types.js';

/** An outcome of an acquire or a release that fails it. @internal */
export type FailedOutcome =
  | Exclude<AcquireOutcome, { readonly status: 'held' } | { readonly status: 'busy' }>
  | Extract<ReleaseOutcome, 'absent' | 'changed'>;

/** Declares the owner's hold lost with `message`; returns the hold's LockLostError. */
export type LoseHold = (message: string) => LockLostError;

/** For an owner with no hold to declare lost: only the error. */
const NO_HOLD: LoseHold = (message) => new LockLostError(message, 'not-owner');

/**
 * The one mapping of a failed acquire or release on lock `name` to the error its caller sees:
 *
 * - acquire `lost`: the {@link LockLostError} of the owner's hold, declared lost;
 * - release `absent` or `changed`: a {@link LockNotOwnedError}, its hold declared lost (the
 *   cause);
 * - acquire `refused`: the kind's own error;
 * - acquire `cancelled`: a {@link LockError} `REDIS_ERROR`, as only a request this client gave up
 *   is refused, and requests are never reused.
 *
 * `loseHold` declares the hold lost (stops its renewal, aborts its signal, emits `lockLost`);
 * without one, the error alone is made.
 * @internal
 */
export function outcomeError(outcome: FailedOutcome, name: string, loseHold: LoseHold = NO_HOLD): LockError {
  if (typeof outcome === 'string') {
    const message =
      outcome === 'absent'
        ? `Lock "${name}" is not held by this owner: it expired or was taken over`
        : `Lock "${name}" is no longer held by this owner: its hold count changed behind its back`;
    return new LockNotOwnedError(message, { cause: loseHold(message) });
  }
  switch (outcome.status) {
    case 'lost':
      return loseHold(
        `Lock "${name}" is no longer held by this owner: it was lost or changed behind its back`,
      );
    case 'refused':
      return outcome.error(name);
    case 'cancelled':
      return new LockError('REDIS_ERROR', `Acquire request for lock "${name}" was refused as cancelled`);
  }
}
