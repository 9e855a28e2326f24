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
import { fencingTokenKey, waitQueueKey } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

/** Reply codes of the acquire scripts (lua-scripts/lock/acquire.lua, fenced-lock/acquire.lua). */
const ACQUIRE_CANCELLED = -3;
const HOLD_LOST = -4;
/** Reply codes of the release scripts. */
const RELEASE_PARTIAL = 0;
const RELEASE_FREED = 1;

function acquireOutcome(reply: unknown, fenced: boolean): AcquireOutcome | undefined {
  if (reply === null || reply === undefined) return fenced ? undefined : { status: 'held', proof: undefined };
  if (Array.isArray(reply)) {
    // Held by another owner: its PTTL, and whether the waiter's entry is the new one.
    return { status: 'busy', pttl: Number(reply[0]), pushed: Number(reply[1]) === 1 };
  }
  const code = Number(reply);
  if (code === ACQUIRE_CANCELLED) return { status: 'cancelled' };
  if (code === HOLD_LOST) return { status: 'lost' };
  // A fenced acquire that took the lock answers with the new token (>= 1).
  if (fenced && Number.isSafeInteger(code) && code >= 1) return { status: 'held', proof: String(code) };
  return undefined;
}

function releaseOutcome(reply: unknown): ReleaseOutcome | undefined {
  if (reply === null || reply === undefined) return 'absent';
  switch (Number(reply)) {
    case RELEASE_PARTIAL:
      return 'partial';
    case RELEASE_FREED:
      return 'freed';
    case HOLD_LOST:
      return 'changed';
    default:
      return undefined;
  }
}

/**
 * The reentrant lock's protocol — Redisson's RLock layout, a hash `owner field -> hold count`
 * whose PTTL is the lease, with latchkey's wait queue beside it — and, with `fenced`, its
 * RFencedLock variant, which also counts every acquisition in `redisson_lock_token:{<key>}`
 * and hands the new token to the holder.
 * @internal
 */
export function reentrantProtocol(fenced: boolean): Protocol {
  const scripts = fenced
    ? {
        acquire: luaScripts['fenced-lock/acquire'],
        cancelAcquire: luaScripts['fenced-lock/cancel-acquire'],
        withdraw: luaScripts['fenced-lock/withdraw'],
        release: luaScripts['fenced-lock/release'],
        abandon: luaScripts['fenced-lock/abandon'],
        forceRelease: luaScripts['fenced-lock/force-release'],
      }
    : {
        acquire: luaScripts['lock/acquire'],
        cancelAcquire: luaScripts['lock/cancel-acquire'],
        withdraw: luaScripts['lock/withdraw'],
        release: luaScripts['lock/release'],
        abandon: luaScripts['lock/abandon'],
        forceRelease: luaScripts['lock/force-release'],
      };
  /** The lock's keys: its own, a request key if any, its queue, and the token counter if fenced. */
  const keysOf = fenced
    ? (key: string, request?: string): string[] =>
        request === undefined
          ? [key, waitQueueKey(key), fencingTokenKey(key)]
          : [key, request, waitQueueKey(key), fencingTokenKey(key)]
    : (key: string, request?: string): string[] =>
        request === undefined ? [key, waitQueueKey(key)] : [key, request, waitQueueKey(key)];

  return {
    kind: fenced ? 'fenced-lock' : 'lock',
    queue: {
      withdraw(target: Target, field: string, entry: string, handed: boolean): ScriptCall {
        return {
          script: scripts.withdraw,
          keys: keysOf(target.key),
          args: [target.channel, field, entry, handed ? '1' : ''],
        };
      },
    },
    needsProof: fenced,
    poll: undefined,
    acquire(request: AcquireRequest, retry: boolean): ScriptCall {
      return {
        script: scripts.acquire,
        keys: keysOf(request.target.key, request.requestKey),
        args: [
          String(request.leaseMs),
          request.field,
          String(request.expected),
          request.waiter,
          request.queuedAs,
          String(request.queueTtlMs),
          retry ? '1' : '',
        ],
      };
    },
    acquireOutcome: (reply) => acquireOutcome(reply, fenced),
    cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall {
      const { target } = request;
      return {
        script: scripts.cancelAcquire,
        keys: keysOf(target.key, request.requestKey),
        args: [
          target.channel,
          request.field,
          String(request.expected),
          String(recordTtlMs),
          request.waiter,
          request.queuedAs,
        ],
      };
    },
    release(hold: HeldLock, expected: number): ScriptCall {
      return {
        script: scripts.release,
        keys: keysOf(hold.key),
        args: [hold.channel, String(hold.ttlMs), hold.field, String(expected)],
      };
    },
    releaseOutcome,
    renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall {
      return {
        script: luaScripts['lock/renew'],
        keys: holds.map((hold) => hold.key),
        args: [String(leaseMs), ...holds.map((hold) => hold.field)],
      };
    },
    renewOutcome: renewedFlags,
    abandon(hold: HeldLock): ScriptCall {
      return {
        script: scripts.abandon,
        keys: keysOf(hold.key),
        args: [hold.channel, hold.field],
      };
    },
    forceRelease(target: Target): ScriptCall {
      return {
        script: scripts.forceRelease,
        keys: keysOf(target.key),
        args: [target.channel],
      };
    },
  };
}
