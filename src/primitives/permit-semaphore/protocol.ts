import { randomBytes } from 'node:crypto';
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
  type ReplyReader,
  type Target,
} from '../../engine/index.js';
import { permitTimeoutKey, requestKey } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

/**
 * How long a release's or a permit change's reply is kept for a retried copy of the same request,
 * in milliseconds: longer than any retry of it runs.
 */
export const REQUEST_RECORD_TTL_MS = 60_000;

/** The number of permits a counter starts with, as the scripts take it: empty for none given. */
export function initialArg(permits: number | undefined): string {
  return permits === undefined ? '' : String(permits);
}

/** permit-semaphore/acquire.lua: nil, when the earliest lease out ends (-1: none will), or cancelled. */
function acquired(reply: unknown): AcquireOutcome | undefined {
  const untilEarliest = Number(reply);
  if (reply !== null && reply !== undefined && Number.isInteger(untilEarliest) && untilEarliest >= -1) {
    return { status: 'busy', pttl: untilEarliest, pushed: false };
  }
  // The script keeps no hold count: it never says a hold was lost.
  return untilEarliest === REPLY.HOLD_LOST ? undefined : sharedAcquireReply(reply);
}

/** permit-semaphore/release.lua: 1 when the permit was out under its id and is given back, else 0. */
function released(reply: unknown): ReleaseOutcome | undefined {
  const code = Number(reply);
  if (code === REPLY.RELEASE_FREED) return 'freed';
  return code === 0 ? 'absent' : undefined;
}

/** What permit-semaphore/available.lua answers. @internal */
export interface PermitCounts {
  readonly free: number;
  readonly out: number;
  /** Milliseconds until the earliest lease of the permits out ends; -1: none will. */
  readonly untilEarliest: number;
}

function counts(reply: unknown): PermitCounts | undefined {
  if (!Array.isArray(reply) || reply.length !== 3) return undefined;
  const [free, out, untilEarliest] = reply.map(Number);
  return { free: free ?? 0, out: out ?? 0, untilEarliest: untilEarliest ?? -1 };
}

/** An integer reply, or undefined when it is not one. */
function integer(reply: unknown): number | undefined {
  const value = Number(reply);
  return reply !== null && reply !== undefined && Number.isInteger(value) ? value : undefined;
}

/** The free and out permits and the end of the earliest lease out, after expired leases come back. */
export function availableCall(key: string, channel: string, initial: string): ScriptCall<PermitCounts> {
  return new ScriptCall(
    luaScripts['permit-semaphore/available'],
    [key, permitTimeoutKey(key)],
    [channel, initial],
    counts,
  );
}

/**
 * A change of the count: by how many permits, and what a missing counter starts from (see
 * {@link initialArg}).
 */
interface PermitChange {
  readonly permits: number;
  readonly initial: string;
}

/** permit-semaphore/set-permits.lua in `mode`, once per `request`. */
function setPermitsCall<R>(
  key: string,
  channel: string,
  mode: 'set' | 'add',
  change: PermitChange,
  request: string,
  recordTtlMs: number,
  read: ReplyReader<R>,
): ScriptCall<R> {
  return new ScriptCall(
    luaScripts['permit-semaphore/set-permits'],
    [key, permitTimeoutKey(key), request],
    [channel, mode, String(change.permits), change.initial, String(recordTtlMs)],
    read,
  );
}

/** Sets the count if the counter is missing, once per `request`: whether it was created. */
export function trySetPermitsCall(
  key: string,
  channel: string,
  change: PermitChange,
  request: string,
  recordTtlMs: number,
): ScriptCall<boolean> {
  return setPermitsCall(key, channel, 'set', change, request, recordTtlMs, yesOrNo);
}

/** Adds to the count, once per `request`: the new count of free permits. */
export function addPermitsCall(
  key: string,
  channel: string,
  change: PermitChange,
  request: string,
  recordTtlMs: number,
): ScriptCall<number> {
  return setPermitsCall(key, channel, 'add', change, request, recordTtlMs, integer);
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
): ScriptCall<ReleaseOutcome> {
  return new ScriptCall(
    luaScripts['permit-semaphore/release'],
    [key, permitTimeoutKey(key), request],
    [channel, permitId, String(recordTtlMs)],
    released,
  );
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
    acquire(request: AcquireRequest): ScriptCall<AcquireOutcome> {
      const { key, channel } = request.target;
      const args = [channel, request.field, String(request.leaseMs), initial];
      return new ScriptCall(
        luaScripts['permit-semaphore/acquire'],
        [key, request.requestKey, permitTimeoutKey(key)],
        args,
        acquired,
      );
    },
    cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall<boolean> {
      const { key, channel } = request.target;
      return new ScriptCall(
        luaScripts['permit-semaphore/cancel-acquire'],
        [key, request.requestKey, permitTimeoutKey(key)],
        [channel, request.field, String(recordTtlMs)],
        yesOrNo,
      );
    },
    release(hold: HeldLock): ScriptCall<ReleaseOutcome> {
      return releaseCall(hold.key, hold.channel, hold.field, newRequestKey(hold.key));
    },
    renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall<readonly boolean[]> {
      return new ScriptCall(
        luaScripts['permit-semaphore/renew'],
        holds.flatMap((hold) => [hold.key, permitTimeoutKey(hold.key)]),
        [String(leaseMs), ...holds.flatMap((hold) => [hold.channel, hold.field])],
        renewedFlags(holds.length),
      );
    },
    abandon(hold: HeldLock): ScriptCall<ReleaseOutcome> {
      return releaseCall(hold.key, hold.channel, hold.field, newRequestKey(hold.key));
    },
    forceRelease(target: Target): ScriptCall<boolean> {
      return new ScriptCall(
        luaScripts['permit-semaphore/force-release'],
        [target.key, permitTimeoutKey(target.key)],
        [target.channel],
        yesOrNo,
      );
    },
  };
}
