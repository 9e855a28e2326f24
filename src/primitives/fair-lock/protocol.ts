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
import { fairHeartbeatKey, fairQueueKey, fairTimeoutKey, fairWaiterChannel } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

/** Reply codes of lua-scripts/fair-lock/acquire.lua. */
const ACQUIRE_CANCELLED = -3;
const HOLD_LOST = -4;
/** Reply codes of lua-scripts/fair-lock/release.lua. */
const RELEASE_PARTIAL = 0;
const RELEASE_FREED = 1;

function acquireOutcome(reply: unknown): AcquireOutcome | undefined {
  if (reply === null || reply === undefined) return { status: 'held', proof: undefined };
  if (Array.isArray(reply)) {
    // Not this owner's turn: when to look again (the lock's PTTL, or when the head may lapse).
    const wait = Number(reply[0]);
    return Number.isInteger(wait) && wait >= -1 ? { status: 'busy', pttl: wait, pushed: false } : undefined;
  }
  const code = Number(reply);
  if (code === ACQUIRE_CANCELLED) return { status: 'cancelled' };
  if (code === HOLD_LOST) return { status: 'lost' };
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
 * The fair lock's keys: its own, a request key if any, its queue, its waiters' deadlines in
 * Redisson's arithmetic, and latchkey's waiters' heartbeat deadlines.
 */
function keysOf(key: string, request?: string): string[] {
  const queue = [fairQueueKey(key), fairTimeoutKey(key), fairHeartbeatKey(key)];
  return request === undefined ? [key, ...queue] : [key, request, ...queue];
}

function fairProtocol(waiterTimeoutMs: number, waitStepMs: number): Protocol {
  const waiterTimeout = String(waiterTimeoutMs);
  const waitStep = String(waitStepMs);
  return {
    kind: 'fair-lock',
    // Waiters are served from Redisson's queue in Redis, in its order; nothing is handed over.
    queue: undefined,
    needsProof: false,
    poll: undefined,
    waitChannel: (target: Target, field: string) => fairWaiterChannel(target.key, field),
    // Three calls per waiter timeout: a waiter that misses one or two (a slow reply, a short
    // stall) still keeps its place.
    heartbeatMs: Math.max(1, Math.floor(waiterTimeoutMs / 3)),
    leave(target: Target, field: string): ScriptCall {
      return {
        script: luaScripts['fair-lock/leave'],
        keys: keysOf(target.key),
        args: [target.channel, field, waitStep],
      };
    },
    acquire(request: AcquireRequest): ScriptCall {
      return {
        script: luaScripts['fair-lock/acquire'],
        keys: keysOf(request.target.key, request.requestKey),
        args: [
          String(request.leaseMs),
          request.field,
          String(request.expected),
          request.waiting ? '1' : '',
          waiterTimeout,
          waitStep,
        ],
      };
    },
    acquireOutcome,
    cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall {
      const { target } = request;
      return {
        script: luaScripts['fair-lock/cancel-acquire'],
        keys: keysOf(target.key, request.requestKey),
        args: [target.channel, request.field, String(request.expected), String(recordTtlMs), waitStep],
      };
    },
    release(hold: HeldLock, expected: number): ScriptCall {
      return {
        script: luaScripts['fair-lock/release'],
        keys: keysOf(hold.key),
        args: [hold.channel, String(hold.ttlMs), hold.field, String(expected)],
      };
    },
    releaseOutcome,
    // The lock itself is a plain RLock hash: the lock's renewal applies as it is.
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
        script: luaScripts['fair-lock/abandon'],
        keys: keysOf(hold.key),
        args: [hold.channel, hold.field],
      };
    },
    forceRelease(target: Target): ScriptCall {
      return {
        script: luaScripts['fair-lock/force-release'],
        keys: keysOf(target.key),
        args: [target.channel],
      };
    },
  };
}

/**
 * One protocol per waiter timeout and wait step, shared by every fair lock that uses them, so the
 * watchdog renews their holds together (it batches holds of one protocol).
 */
const protocols = new Map<string, Protocol>();

/**
 * The fair lock's protocol: Redisson's RFairLock layout — the RLock hash `owner field -> hold
 * count`, a list `redisson_lock_queue:{<key>}` of waiting owners in arrival order and a sorted
 * set `redisson_lock_timeout:{<key>}` of their deadlines (absolute ms by Redis's clock) — and its
 * wake-up, `0` on `redisson_lock__channel:{<key>}:<owner field>` for the queue's head alone. The
 * deadlines follow RFairLock's arithmetic with `waitStepMs` as its threadWaitTime, so a line
 * shared with Redisson clients keeps its order. latchkey's waiters also keep a heartbeat deadline,
 * now + `waiterTimeoutMs` after each call, in `{<key>}:latchkey_heartbeats`: a dead or stalled
 * one is dropped when it reaches the head with that deadline passed.
 * @internal
 */
export function fairLockProtocol(waiterTimeoutMs: number, waitStepMs: number): Protocol {
  const id = `${waiterTimeoutMs}/${waitStepMs}`;
  let protocol = protocols.get(id);
  if (protocol === undefined) {
    protocol = fairProtocol(waiterTimeoutMs, waitStepMs);
    protocols.set(id, protocol);
  }
  return protocol;
}
