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
import { fencingTokenKey, foreignKey, waitQueueKey } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

type Script = ScriptCall['script'];

/** One variant of the reentrant lock: its scripts, its keys, and how its acquire answers. */
interface Variant {
  readonly kind: string;
  readonly fenced: boolean;
  readonly acquire: Script;
  readonly cancelAcquire: Script;
  readonly withdraw: Script;
  readonly release: Script;
  readonly abandon: Script;
  readonly forceRelease: Script;
  /** The lock's keys: its own, a request key if any, its queue and foreign key, and the token counter if fenced. */
  readonly keysOf: (key: string, request?: string) => string[];
  readonly acquired: (reply: unknown) => AcquireOutcome | undefined;
}

/** lock/acquire.lua: nil, {pttl, pushed} when another owner holds the lock, or a shared code. */
function acquired(reply: unknown): AcquireOutcome | undefined {
  // Held by another owner: its PTTL, and whether the waiter's entry is the new one.
  if (Array.isArray(reply)) return { status: 'busy', pttl: Number(reply[0]), pushed: Number(reply[1]) === 1 };
  return sharedAcquireReply(reply);
}

/** fenced-lock/acquire.lua: as lock/acquire.lua, but a taken lock answers its new token (>= 1). */
function fencedAcquired(reply: unknown): AcquireOutcome | undefined {
  if (reply === null || reply === undefined) return undefined;
  const code = Number(reply);
  if (!Array.isArray(reply) && Number.isSafeInteger(code) && code >= 1)
    return { status: 'held', proof: String(code) };
  return acquired(reply);
}

const LOCK: Variant = {
  kind: 'lock',
  fenced: false,
  acquire: luaScripts['lock/acquire'],
  cancelAcquire: luaScripts['lock/cancel-acquire'],
  withdraw: luaScripts['lock/withdraw'],
  release: luaScripts['lock/release'],
  abandon: luaScripts['lock/abandon'],
  forceRelease: luaScripts['lock/force-release'],
  keysOf: (key, request) => [
    key,
    ...(request === undefined ? [] : [request]),
    waitQueueKey(key),
    foreignKey(key),
  ],
  acquired,
};

const FENCED: Variant = {
  kind: 'fenced-lock',
  fenced: true,
  acquire: luaScripts['fenced-lock/acquire'],
  cancelAcquire: luaScripts['fenced-lock/cancel-acquire'],
  withdraw: luaScripts['fenced-lock/withdraw'],
  release: luaScripts['fenced-lock/release'],
  abandon: luaScripts['fenced-lock/abandon'],
  forceRelease: luaScripts['fenced-lock/force-release'],
  keysOf: (key, request) => [...LOCK.keysOf(key, request), fencingTokenKey(key)],
  acquired: fencedAcquired,
};

function acquireCall(variant: Variant, request: AcquireRequest, retry: boolean): ScriptCall<AcquireOutcome> {
  const args = [
    String(request.leaseMs),
    request.field,
    String(request.expected),
    request.waiter,
    request.queuedAs,
    String(request.queueTtlMs),
    retry ? '1' : '',
  ];
  return new ScriptCall(
    variant.acquire,
    variant.keysOf(request.target.key, request.requestKey),
    args,
    variant.acquired,
  );
}

function cancelAcquireCall(
  variant: Variant,
  request: AcquireRequest,
  recordTtlMs: number,
): ScriptCall<boolean> {
  const { target } = request;
  const args = [
    target.channel,
    request.field,
    String(request.expected),
    String(recordTtlMs),
    request.waiter,
    request.queuedAs,
  ];
  return new ScriptCall(variant.cancelAcquire, variant.keysOf(target.key, request.requestKey), args, yesOrNo);
}

function withdrawCall(
  variant: Variant,
  target: Target,
  field: string,
  entry: string,
  handed: boolean,
): ScriptCall<boolean> {
  const args = [target.channel, field, entry, handed ? '1' : ''];
  return new ScriptCall(variant.withdraw, variant.keysOf(target.key), args, yesOrNo);
}

function releaseCall(variant: Variant, hold: HeldLock, expected: number): ScriptCall<ReleaseOutcome> {
  const args = [hold.channel, String(hold.ttlMs), hold.field, String(expected)];
  return new ScriptCall(variant.release, variant.keysOf(hold.key), args, countedRelease);
}

/** The renewal of the lock's holds; a fenced lock's too (its token changes only on an acquire). */
function renewCall(holds: readonly HeldLock[], leaseMs: number): ScriptCall<readonly boolean[]> {
  const keys = holds.map((hold) => hold.key);
  const args = [String(leaseMs), ...holds.map((hold) => hold.field)];
  return new ScriptCall(luaScripts['lock/renew'], keys, args, renewedFlags(holds.length));
}

/**
 * The reentrant lock's protocol — Redisson's RLock layout, a hash `owner field -> hold count`
 * whose PTTL is the lease, with latchkey's wait queue beside it — and, with `fenced`, its
 * RFencedLock variant, which also counts every acquisition in `redisson_lock_token:{<key>}`
 * and hands the new token to the holder.
 * @internal
 */
export function reentrantProtocol(fenced: boolean): Protocol {
  const variant = fenced ? FENCED : LOCK;
  return {
    kind: variant.kind,
    queue: {
      withdraw: (target, field, entry, handed) => withdrawCall(variant, target, field, entry, handed),
    },
    needsProof: variant.fenced,
    poll: undefined,
    acquire: (request, retry) => acquireCall(variant, request, retry),
    cancelAcquire: (request, recordTtlMs) => cancelAcquireCall(variant, request, recordTtlMs),
    release: (hold, expected) => releaseCall(variant, hold, expected),
    renew: renewCall,
    abandon: (hold) =>
      new ScriptCall(variant.abandon, variant.keysOf(hold.key), [hold.channel, hold.field], yesOrNo),
    forceRelease: (target) =>
      new ScriptCall(variant.forceRelease, variant.keysOf(target.key), [target.channel], yesOrNo),
  };
}
