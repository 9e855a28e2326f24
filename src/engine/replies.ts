import type { ReplyReader } from './script-call.js';
import type { AcquireOutcome, ReleaseOutcome } from './types.js';

/**
 * The reply codes that more than one kind's scripts give, named once; each script's header says
 * which of them it gives. A code only one kind's scripts give is named in that kind's protocol.
 * @internal
 */
export const REPLY = {
  /** An acquire whose request was given up (its cancel-acquire ran first): nothing changed. */
  ACQUIRE_CANCELLED: -3,
  /** The owner's hold count is neither what the client knew nor one more: its hold was lost. */
  HOLD_LOST: -4,
  /** A release that left holds of the owner (its count is one less). */
  RELEASE_PARTIAL: 0,
  /** A release that freed the lock, handed it on, or gave the permit back. */
  RELEASE_FREED: 1,
  /** A yes/no script's yes (a lock deleted, a field removed, a request undone). */
  YES: 1,
  /** A yes/no script's no. */
  NO: 0,
} as const;

/**
 * The acquire replies every kind with holds shares: nil when the owner now holds the lock (no
 * proof), and the cancelled and lost codes; undefined for any other reply, which the kind reads.
 * @internal
 */
export function sharedAcquireReply(reply: unknown): AcquireOutcome | undefined {
  if (reply === null || reply === undefined) return { status: 'held', proof: undefined };
  const code = Number(reply);
  if (code === REPLY.ACQUIRE_CANCELLED) return { status: 'cancelled' };
  if (code === REPLY.HOLD_LOST) return { status: 'lost' };
  return undefined;
}

/**
 * The release reply of the kinds that count holds in a hash (lock, fenced lock, fair lock,
 * read-write lock): nil when the owner holds nothing, 0 when holds remain, 1 when the lock was
 * freed or handed on, the lost code when the owner's count is not what the client knew.
 * @internal
 */
export function countedRelease(reply: unknown): ReleaseOutcome | undefined {
  if (reply === null || reply === undefined) return 'absent';
  switch (Number(reply)) {
    case REPLY.RELEASE_PARTIAL:
      return 'partial';
    case REPLY.RELEASE_FREED:
      return 'freed';
    case REPLY.HOLD_LOST:
      return 'changed';
    default:
      return undefined;
  }
}

/** A yes/no script's reply (1 or 0) as a boolean. @internal */
export function yesOrNo(reply: unknown): boolean | undefined {
  const code = Number(reply);
  if (reply === null || reply === undefined) return undefined;
  return code === REPLY.YES ? true : code === REPLY.NO ? false : undefined;
}

/**
 * The reader of a batch renewal of `count` holds: one integer per hold, 1 when it was renewed, 0
 * when its owner no longer holds it. Every kind's renewal script answers this way.
 * @internal
 */
export function renewedFlags(count: number): ReplyReader<readonly boolean[]> {
  return (reply) =>
    Array.isArray(reply) && reply.length === count ? reply.map((flag) => Number(flag) === 1) : undefined;
}
