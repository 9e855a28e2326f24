import { LockUpgradeError } from '../../errors.js';
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
import { readerTimeoutPrefix, waitingWritersKey, writerField } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

/**
 * How long a waiting writer keeps new readers out after its last attempt, in milliseconds: a
 * writer that died while waiting stops holding readers back within this time. A live waiting
 * writer asks again every third of it (the write protocol's heartbeat).
 */
export const WRITER_TIMEOUT_MS = 10_000;

/** Reply code of write-acquire.lua for an owner holding the read lock: an upgrade, refused. */
const UPGRADE_REFUSED = -5;

/** What every free or departure on the channel may change: every local waiter tries again. */
const WAKE_ALL = (): number => Number.POSITIVE_INFINITY;

const WRITE_SUFFIX = ':write';

/**
 * The reader field of the owner whose writer field is `writer` (`<owner>:write`, see
 * `writerField` in src/keys.ts): the write lock's scripts look at both.
 */
function readerOf(writer: string): string {
  return writer.endsWith(WRITE_SUFFIX) ? writer.slice(0, -WRITE_SUFFIX.length) : writer;
}

/** The acquire scripts: nil, {pttl, 0} when the owner must wait, a shared code, or the refusal. */
function acquired(reply: unknown): AcquireOutcome | undefined {
  if (Array.isArray(reply)) return { status: 'busy', pttl: Number(reply[0]), pushed: false };
  if (reply === null || reply === undefined || Number(reply) !== UPGRADE_REFUSED)
    return sharedAcquireReply(reply);
  return {
    status: 'refused',
    error: (name) =>
      new LockUpgradeError(
        `Cannot take the write lock of "${name}" while holding its read lock: an upgrade would wait for itself. Release the read lock first, or take the write lock from the start`,
      ),
  };
}

/**
 * The read lock's protocol — Redisson's RReadLock layout: a reader field `<owner> -> count` in the
 * lock's hash and one lease key per hold, `{<key>}:<owner>:rwlock_timeout:<n>` — with latchkey's
 * writer preference: a new reader waits while a writer waits.
 * @internal
 */
export const READ_PROTOCOL: Protocol = {
  kind: 'read-lock',
  queue: undefined,
  needsProof: false,
  poll: undefined,
  wakes: WAKE_ALL,
  acquire(request: AcquireRequest): ScriptCall<AcquireOutcome> {
    const { key } = request.target;
    return new ScriptCall(
      luaScripts['read-write-lock/read-acquire'],
      [key, request.requestKey, readerTimeoutPrefix(key, request.field), waitingWritersKey(key)],
      [String(request.leaseMs), request.field, writerField(request.field), String(request.expected)],
      acquired,
    );
  },
  cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall<boolean> {
    const { key, channel } = request.target;
    return new ScriptCall(
      luaScripts['read-write-lock/read-cancel-acquire'],
      [key, request.requestKey, readerTimeoutPrefix(key, request.field)],
      [channel, request.field, String(request.expected), String(recordTtlMs)],
      yesOrNo,
    );
  },
  release(hold: HeldLock, expected: number): ScriptCall<ReleaseOutcome> {
    return new ScriptCall(
      luaScripts['read-write-lock/read-release'],
      [hold.key, readerTimeoutPrefix(hold.key, hold.field)],
      [hold.channel, hold.field, String(expected)],
      countedRelease,
    );
  },
  renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall<readonly boolean[]> {
    return new ScriptCall(
      luaScripts['read-write-lock/read-renew'],
      holds.flatMap((hold) => [hold.key, readerTimeoutPrefix(hold.key, hold.field)]),
      [String(leaseMs), ...holds.flatMap((hold) => [hold.field, hold.channel])],
      renewedFlags(holds.length),
    );
  },
  abandon(hold: HeldLock): ScriptCall<boolean> {
    return new ScriptCall(
      luaScripts['read-write-lock/read-abandon'],
      [hold.key, readerTimeoutPrefix(hold.key, hold.field)],
      [hold.channel, hold.field],
      yesOrNo,
    );
  },
  forceRelease,
};

function forceRelease(target: Target): ScriptCall<boolean> {
  return new ScriptCall(luaScripts['read-write-lock/force-release'], [target.key], [target.channel], yesOrNo);
}

/**
 * The write lock's protocol — Redisson's RWriteLock layout: the writer field `<owner>:write ->
 * count` in the lock's hash, whose PTTL is the lease — with latchkey's waiting writers, a zset
 * `latchkey_writers:{<key>}` that keeps new readers out while a writer waits, and a refused
 * upgrade where Redisson waits forever. The owner's field here is its writer field.
 * @internal
 */
export const WRITE_PROTOCOL: Protocol = {
  kind: 'write-lock',
  queue: undefined,
  needsProof: false,
  poll: undefined,
  wakes: WAKE_ALL,
  // A waiting writer's entry lapses unless it asks again: three times per lapse.
  heartbeatMs: Math.floor(WRITER_TIMEOUT_MS / 3),
  leave(target: Target, field: string): ScriptCall<boolean> {
    return new ScriptCall(
      luaScripts['read-write-lock/write-leave'],
      [waitingWritersKey(target.key)],
      [target.channel, field],
      yesOrNo,
    );
  },
  acquire(request: AcquireRequest): ScriptCall<AcquireOutcome> {
    const { key } = request.target;
    const args = [
      String(request.leaseMs),
      request.field,
      readerOf(request.field),
      String(request.expected),
      String(WRITER_TIMEOUT_MS),
      request.waiting ? '1' : '',
    ];
    return new ScriptCall(
      luaScripts['read-write-lock/write-acquire'],
      [key, request.requestKey, waitingWritersKey(key)],
      args,
      acquired,
    );
  },
  cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall<boolean> {
    const { key, channel } = request.target;
    return new ScriptCall(
      luaScripts['read-write-lock/write-cancel-acquire'],
      [key, request.requestKey],
      [channel, request.field, String(request.expected), String(recordTtlMs)],
      yesOrNo,
    );
  },
  release(hold: HeldLock, expected: number): ScriptCall<ReleaseOutcome> {
    return new ScriptCall(
      luaScripts['read-write-lock/write-release'],
      [hold.key],
      [hold.channel, String(hold.ttlMs), hold.field, String(expected)],
      countedRelease,
    );
  },
  renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall<readonly boolean[]> {
    return new ScriptCall(
      luaScripts['read-write-lock/write-renew'],
      holds.map((hold) => hold.key),
      [String(leaseMs), ...holds.map((hold) => hold.field)],
      renewedFlags(holds.length),
    );
  },
  abandon(hold: HeldLock): ScriptCall<boolean> {
    return new ScriptCall(
      luaScripts['read-write-lock/write-abandon'],
      [hold.key],
      [hold.channel, hold.field],
      yesOrNo,
    );
  },
  forceRelease,
};
