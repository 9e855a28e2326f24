import {
  renewedFlags,
  type AcquireOutcome,
  type AcquireRequest,
  type HeldLock,
  type Protocol,
  type ReleaseOutcome,
  type ScriptCall,
  type Target,
} from '../../engine/index.js';
import { luaScripts } from '../../scripts/generated.js';

/** Reply code of simple-lock/acquire.lua for a request given up by cancel-acquire.lua. */
const ACQUIRE_CANCELLED = -3;
/** Reply of simple-lock/release.lua when the key held the token and is deleted. */
const RELEASED = 1;

/**
 * Re-checks of a waiter on a lock whose holder may announce nothing (redis-py and node-redlock
 * publish no unlock message): soon at first, then less often, never less often than every
 * 250 ms. latchkey's own releases wake waiters at once.
 */
const POLL = { minMs: 25, maxMs: 250 } as const;

function acquireOutcome(reply: unknown): AcquireOutcome | undefined {
  if (reply === null || reply === undefined) return { status: 'held', proof: undefined };
  const code = Number(reply);
  if (code === ACQUIRE_CANCELLED) return { status: 'cancelled' };
  // The holder's PTTL; -1 for a key that never expires.
  if (Number.isInteger(code) && code >= -1) return { status: 'busy', pttl: code, pushed: false };
  return undefined;
}

function releaseOutcome(reply: unknown): ReleaseOutcome | undefined {
  if (reply === null || reply === undefined) return 'absent';
  return Number(reply) === RELEASED ? 'freed' : undefined;
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
  acquire(request: AcquireRequest): ScriptCall {
    return {
      script: luaScripts['simple-lock/acquire'],
      keys: [request.target.key, request.requestKey],
      args: [request.field, String(request.leaseMs)],
    };
  },
  acquireOutcome,
  cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall {
    return {
      script: luaScripts['simple-lock/cancel-acquire'],
      keys: [request.target.key, request.requestKey],
      args: [request.target.channel, request.field, String(recordTtlMs)],
    };
  },
  release(hold: HeldLock): ScriptCall {
    return { script: luaScripts['simple-lock/release'], keys: [hold.key], args: [hold.channel, hold.field] };
  },
  releaseOutcome,
  renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall {
    return {
      script: luaScripts['simple-lock/renew'],
      keys: holds.map((hold) => hold.key),
      args: [String(leaseMs), ...holds.map((hold) => hold.field)],
    };
  },
  renewOutcome: renewedFlags,
  abandon(hold: HeldLock): ScriptCall {
    // Compare-and-delete: the key goes only if it still holds this hold's token.
    return { script: luaScripts['simple-lock/release'], keys: [hold.key], args: [hold.channel, hold.field] };
  },
  forceRelease(target: Target): ScriptCall {
    return { script: luaScripts['simple-lock/force-release'], keys: [target.key], args: [target.channel] };
  },
};
