import { randomBytes } from 'node:crypto';
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
import { permitTimeoutKey, requestKey } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

/** Reply code of permit-semaphore/acquire.lua for a request given up by cancel-acquire.lua. */
const ACQUIRE_CANCELLED = -3;
/** Reply of permit-semaphore/release.lua when the permit was out under its id and is given back. */
const RELEASED = 1;
/**
 * How long a release's or a permit change's reply is kept for a retried copy of the same request,
 * in milliseconds: longer than any retry of it runs.
 */
export const REQUEST_RECORD_TTL_MS = 60_000;

/** The number of permits a counter starts with, as the scripts take it: empty for none given. */
export function initialArg(permits: number | undefined): string {
  return permits === undefined ? '' : String(permits);
}

function acquireOutcome(reply: unknown): AcquireOutcome | undefined {
  if (reply === null || reply === undefined) return { status: 'held', proof: undefined };
  const code = Number(reply);
  if (code === ACQUIRE_CANCELLED) return { status: 'cancelled' };
  // Until the earliest lease of the permits out ends; -1 when none will.
  if (Number.isInteger(code) && code >= -1) return { status: 'busy', pttl: code, pushed: false };
  return undefined;
}

function releaseOutcome(reply: unknown): ReleaseOutcome | undefined {
  const code = Number(reply);
  if (code === RELEASED) return 'freed';
  return code === 0 ? 'absent' : undefined;
}

/**
 * One message on `redisson_sc:{<key>}` is the count of free permits after a release, a reclaim or
 * a change of permits: that many local waiters may go. Anything else wakes one, who re-checks.
 */
function wakes(message: string): number {
  const free = Number(message);
  return Number.isInteger(free) && free >= 1 ? free : 1;
}

/** A release of the permit `permitId` that takes effect once however often it is sent. */
export function releaseCall(
  key: string,
  channel: string,
  permitId: string,
  request: string,
  recordTtlMs = REQUEST_RECORD_TTL_MS,
): ScriptCall {
  return {
    script: luaScripts['permit-semaphore/release'],
    keys: [key, permitTimeoutKey(key), request],
    args: [channel, permitId, String(recordTtlMs)],
  };
}

/** A fresh request key for a release of a hold: its own, so a retried copy gets the same reply. */
function newRequestKey(key: string): string {
  return requestKey(key, randomBytes(8).toString('hex'));
}

/**
 * The permit semaphore's protocol (Redisson's RPermitExpirableSemaphore layout): a counter of free
 * permits at the semaphore's key, and `{<key>}:timeout`, a sorted set of the permits out scored by
 * the end of their leases (ms since the epoch, by Redis's clock). A hold is one permit and its
 * owner "field" is the permit id. Every script first gives back the permits whose leases ended.
 * No wait queue: whoever asks first after a permit comes back takes it.
 * @internal
 */
export function permitSemaphoreProtocol(initialPermits: number | undefined): Protocol {
  const initial = initialArg(initialPermits);
  return {
    kind: 'permit-semaphore',
    queue: undefined,
    needsProof: false,
    // Every free is published, by latchkey and by Redisson; a lease that ends publishes nothing,
    // which the busy reply's bound covers (the earliest lease's end).
    poll: undefined,
    wakes,
    acquire(request: AcquireRequest): ScriptCall {
      return {
        script: luaScripts['permit-semaphore/acquire'],
        keys: [request.target.key, request.requestKey, permitTimeoutKey(request.target.key)],
        args: [request.target.channel, request.field, String(request.leaseMs), initial],
      };
    },
    acquireOutcome,
    cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall {
      return {
        script: luaScripts['permit-semaphore/cancel-acquire'],
        keys: [request.target.key, request.requestKey, permitTimeoutKey(request.target.key)],
        args: [request.target.channel, request.field, String(recordTtlMs)],
      };
    },
    release(hold: HeldLock): ScriptCall {
      return releaseCall(hold.key, hold.channel, hold.field, newRequestKey(hold.key));
    },
    releaseOutcome,
    renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall {
      return {
        script: luaScripts['permit-semaphore/renew'],
        keys: holds.flatMap((hold) => [hold.key, permitTimeoutKey(hold.key)]),
        args: [String(leaseMs), ...holds.flatMap((hold) => [hold.channel, hold.field])],
      };
    },
    renewOutcome: renewedFlags,
    abandon(hold: HeldLock): ScriptCall {
      return releaseCall(hold.key, hold.channel, hold.field, newRequestKey(hold.key));
    },
    forceRelease(target: Target): ScriptCall {
      return {
        script: luaScripts['permit-semaphore/force-release'],
        keys: [target.key, permitTimeoutKey(target.key)],
        args: [target.channel],
      };
    },
  };
}
