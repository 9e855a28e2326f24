import {
  renewedFlags,
  REPLY,
  ScriptCall,
  sharedAcquireReply,
  yesOrNo,
  type AcquireOutcome,
  type AcquireRequest,
  type HeldLock,
  type Protocol,
  type ReleaseOutcome,
  type Target,
} from '../../engine/index.js';
import { luaScripts } from '../../scripts/generated.js';

/**
 * Re-checks of a waiter on a lock whose holder may announce nothing (redis-py and node-redlock
 * publish no unlock message): soon at first, then less often, never less often than every
 * 250 ms. latchkey's own releases wake waiters at once.
 */
const POLL = { minMs: 25, maxMs: 250 } as const;

/** simple-lock/acquire.lua: nil, the holder's PTTL (-1: never expires), or the cancelled code. */
function acquired(reply: unknown): AcquireOutcome | undefined {
  const pttl = Number(reply);
  if (reply !== null && reply !== undefined && Number.isInteger(pttl) && pttl >= -1) {
    return { status: 'busy', pttl, pushed: false };
  }
  // The script keeps no hold count: it never says a hold was lost.
  return pttl === REPLY.HOLD_LOST ? undefined : sharedAcquireReply(reply);
}

/** simple-lock/release.lua: 1 when the key held the token and is deleted; nil: it did not. */
function released(reply: unknown): ReleaseOutcome | undefined {
  if (reply === null || reply === undefined) return 'absent';
  return Number(reply) === REPLY.RELEASE_FREED ? 'freed' : undefined;
}

/** Compare-and-delete: the key goes only if it still holds this hold's token. */
function releaseCall(hold: HeldLock): ScriptCall<ReleaseOutcome> {
  return new ScriptCall(luaScripts['simple-lock/release'], [hold.key], [hold.channel, hold.field], released);
}

/**
 * The simple token lock's protocol: `SET <key> <token> NX PX <lease>`, released by
 * compare-and-delete and extended by compare-and-PEXPIRE, as redis-py's `Lock` and node-redlock
 * write it; latchkey also publishes `0` on `latchkey_unlock:{<key>}` when it frees the lock.
 * The owner "field" of a hold is its token. No wait queue: there is no one to hand over to.
 * @internal
 */
export const SIMPLE_LOCK_PROTOCOL: Protocol = {
  kind: 'simple-lock',
  queue: undefined,
  needsProof: false,
  poll: POLL,
  acquire(request: AcquireRequest): ScriptCall<AcquireOutcome> {
    return new ScriptCall(
      luaScripts['simple-lock/acquire'],
      [request.target.key, request.requestKey],
      [request.field, String(request.leaseMs)],
      acquired,
    );
  },
  cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall<boolean> {
    return new ScriptCall(
      luaScripts['simple-lock/cancel-acquire'],
      [request.target.key, request.requestKey],
      [request.target.channel, request.field, String(recordTtlMs)],
      yesOrNo,
    );
  },
  release: releaseCall,
  renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall<readonly boolean[]> {
    return new ScriptCall(
      luaScripts['simple-lock/renew'],
      holds.map((hold) => hold.key),
      [String(leaseMs), ...holds.map((hold) => hold.field)],
      renewedFlags(holds.length),
    );
  },
  abandon: releaseCall,
  forceRelease(target: Target): ScriptCall<boolean> {
    return new ScriptCall(luaScripts['simple-lock/force-release'], [target.key], [target.channel], yesOrNo);
  },
};
