import {
  countedRelease,
  renewedFlags,
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
import { fairHeartbeatKey, fairQueueKey, fairTimeoutKey, fairWaiterChannel } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

/** fair-lock/acquire.lua: nil, {wait} when it is not this owner's turn, or a shared code. */
function acquired(reply: unknown): AcquireOutcome | undefined {
  if (Array.isArray(reply)) {
    // Not this owner's turn: when to look again (the lock's PTTL, or when the head may lapse).
    const wait = Number(reply[0]);
    return Number.isInteger(wait) && wait >= -1 ? { status: 'busy', pttl: wait, pushed: false } : undefined;
  }
  return sharedAcquireReply(reply);
}

/**
 * The fair lock's keys: its own, a request key if any, its queue, its waiters' deadlines in
 * Redisson's arithmetic, and latchkey's waiters' heartbeat deadlines.
 */
function keysOf(key: string, request?: string): string[] {
  const queue = [fairQueueKey(key), fairTimeoutKey(key), fairHeartbeatKey(key)];
  return request === undefined ? [key, ...queue] : [key, request, ...queue];
}

/** What every call of one fair lock protocol passes on: the waiter timeout and the wait step. */
interface Timing {
  readonly waiterTimeout: string;
  readonly waitStep: string;
}

function leaveCall({ waitStep }: Timing, target: Target, field: string): ScriptCall<boolean> {
  const args = [target.channel, field, waitStep];
  return new ScriptCall(luaScripts['fair-lock/leave'], keysOf(target.key), args, yesOrNo);
}

function acquireCall(timing: Timing, request: AcquireRequest): ScriptCall<AcquireOutcome> {
  const args = [
    String(request.leaseMs),
    request.field,
    String(request.expected),
    request.waiting ? '1' : '',
    timing.waiterTimeout,
    timing.waitStep,
  ];
  return new ScriptCall(
    luaScripts['fair-lock/acquire'],
    keysOf(request.target.key, request.requestKey),
    args,
    acquired,
  );
}

function cancelAcquireCall(
  { waitStep }: Timing,
  request: AcquireRequest,
  recordTtlMs: number,
): ScriptCall<boolean> {
  const { target } = request;
  const args = [target.channel, request.field, String(request.expected), String(recordTtlMs), waitStep];
  return new ScriptCall(
    luaScripts['fair-lock/cancel-acquire'],
    keysOf(target.key, request.requestKey),
    args,
    yesOrNo,
  );
}

function releaseCall(hold: HeldLock, expected: number): ScriptCall<ReleaseOutcome> {
  const args = [hold.channel, String(hold.ttlMs), hold.field, String(expected)];
  return new ScriptCall(luaScripts['fair-lock/release'], keysOf(hold.key), args, countedRelease);
}

/** The lock itself is a plain RLock hash: the lock's renewal applies as it is. */
function renewCall(holds: readonly HeldLock[], leaseMs: number): ScriptCall<readonly boolean[]> {
  const keys = holds.map((hold) => hold.key);
  const args = [String(leaseMs), ...holds.map((hold) => hold.field)];
  return new ScriptCall(luaScripts['lock/renew'], keys, args, renewedFlags(holds.length));
}

function fairProtocol(waiterTimeoutMs: number, waitStepMs: number): Protocol {
  const timing: Timing = { waiterTimeout: String(waiterTimeoutMs), waitStep: String(waitStepMs) };
  return {
    kind: 'fair-lock',
    // Waiters are served from Redisson's queue in Redis, in its order; nothing is handed over.
    queue: undefined,
    needsProof: false,
    poll: undefined,
    waitChannel: (target, field) => fairWaiterChannel(target.key, field),
    // Three calls per waiter timeout: a waiter that misses one or two (a slow reply, a short
    // stall) still keeps its place.
    heartbeatMs: Math.max(1, Math.floor(waiterTimeoutMs / 3)),
    leave: (target, field) => leaveCall(timing, target, field),
    acquire: (request) => acquireCall(timing, request),
    cancelAcquire: (request, recordTtlMs) => cancelAcquireCall(timing, request, recordTtlMs),
    release: releaseCall,
    renew: renewCall,
    abandon: (hold) =>
      new ScriptCall(luaScripts['fair-lock/abandon'], keysOf(hold.key), [hold.channel, hold.field], yesOrNo),
    forceRelease: (target) =>
      new ScriptCall(luaScripts['fair-lock/force-release'], keysOf(target.key), [target.channel], yesOrNo),
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
