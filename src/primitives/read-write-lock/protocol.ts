import { LockUpgradeError } from '../../errors.js';
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
import { readerTimeoutPrefix, waitingWritersKey, writerField } from '../../keys.js';
import { luaScripts } from '../../scripts/generated.js';

/**
 * How long a waiting writer keeps new readers out after its last attempt, in milliseconds: a
 * writer that died while waiting stops holding readers back within this time. A live waiting
 * writer asks again every third of it (the write protocol's heartbeat).
 */
export const WRITER_TIMEOUT_MS = 10_000;

/** Reply codes of the acquire scripts (lua-scripts/read-write-lock/*-acquire.lua). */
const ACQUIRE_CANCELLED = -3;
const HOLD_LOST = -4;
const UPGRADE_REFUSED = -5;
/** Reply codes of the release scripts. */
const RELEASE_PARTIAL = 0;
const RELEASE_LAST = 1;

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

function acquireOutcome(reply: unknown): AcquireOutcome | undefined {
  if (reply === null || reply === undefined) return { status: 'held', proof: undefined };
  if (Array.isArray(reply)) return { status: 'busy', pttl: Number(reply[0]), pushed: false };
  switch (Number(reply)) {
    case ACQUIRE_CANCELLED:
      return { status: 'cancelled' };
    case HOLD_LOST:
      return { status: 'lost' };
    case UPGRADE_REFUSED:
      return {
        status: 'refused',
        error: (name) =>
          new LockUpgradeError(
            `Cannot take the write lock of "${name}" while holding its read lock: an upgrade would wait for itself. Release the read lock first, or take the write lock from the start`,
          ),
      };
    default:
      return undefined;
  }
}

function releaseOutcome(reply: unknown): ReleaseOutcome | undefined {
  if (reply === null || reply === undefined) return 'absent';
  switch (Number(reply)) {
    case RELEASE_PARTIAL:
      return 'partial';
    case RELEASE_LAST:
      return 'freed';
    case HOLD_LOST:
      return 'changed';
    default:
      return undefined;
  }
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
  acquire(request: AcquireRequest): ScriptCall {
    const { key } = request.target;
    return {
      script: luaScripts['read-write-lock/read-acquire'],
      keys: [key, request.requestKey, readerTimeoutPrefix(key, request.field), waitingWritersKey(key)],
      args: [String(request.leaseMs), request.field, writerField(request.field), String(request.expected)],
    };
  },
  acquireOutcome,
  cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall {
    const { key, channel } = request.target;
    return {
      script: luaScripts['read-write-lock/read-cancel-acquire'],
      keys: [key, request.requestKey, readerTimeoutPrefix(key, request.field)],
      args: [channel, request.field, String(request.expected), String(recordTtlMs)],
    };
  },
  release(hold: HeldLock, expected: number): ScriptCall {
    return {
      script: luaScripts['read-write-lock/read-release'],
      keys: [hold.key, readerTimeoutPrefix(hold.key, hold.field)],
      args: [hold.channel, hold.field, String(expected)],
    };
  },
  releaseOutcome,
  renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall {
    return {
      script: luaScripts['read-write-lock/read-renew'],
      keys: holds.flatMap((hold) => [hold.key, readerTimeoutPrefix(hold.key, hold.field)]),
      args: [String(leaseMs), ...holds.flatMap((hold) => [hold.field, hold.channel])],
    };
  },
  renewOutcome: renewedFlags,
  abandon(hold: HeldLock): ScriptCall {
    return {
      script: luaScripts['read-write-lock/read-abandon'],
      keys: [hold.key, readerTimeoutPrefix(hold.key, hold.field)],
      args: [hold.channel, hold.field],
    };
  },
  forceRelease,
};

function forceRelease(target: Target): ScriptCall {
  return {
    script: luaScripts['read-write-lock/force-release'],
    keys: [target.key],
    args: [target.channel],
  };
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
  leave(target: Target, field: string): ScriptCall {
    return {
      script: luaScripts['read-write-lock/write-leave'],
      keys: [waitingWritersKey(target.key)],
      args: [target.channel, field],
    };
  },
  acquire(request: AcquireRequest): ScriptCall {
    const { key } = request.target;
    return {
      script: luaScripts['read-write-lock/write-acquire'],
      keys: [key, request.requestKey, waitingWritersKey(key)],
      args: [
        String(request.leaseMs),
        request.field,
        readerOf(request.field),
        String(request.expected),
        String(WRITER_TIMEOUT_MS),
        request.waiting ? '1' : '',
      ],
    };
  },
  acquireOutcome,
  cancelAcquire(request: AcquireRequest, recordTtlMs: number): ScriptCall {
    const { key, channel } = request.target;
    return {
      script: luaScripts['read-write-lock/write-cancel-acquire'],
      keys: [key, request.requestKey],
      args: [channel, request.field, String(request.expected), String(recordTtlMs)],
    };
  },
  release(hold: HeldLock, expected: number): ScriptCall {
    return {
      script: luaScripts['read-write-lock/write-release'],
      keys: [hold.key],
      args: [hold.channel, String(hold.ttlMs), hold.field, String(expected)],
    };
  },
  releaseOutcome,
  renew(holds: readonly HeldLock[], leaseMs: number): ScriptCall {
    return {
      script: luaScripts['read-write-lock/write-renew'],
      keys: holds.map((hold) => hold.key),
      args: [String(leaseMs), ...holds.map((hold) => hold.field)],
    };
  },
  renewOutcome: renewedFlags,
  abandon(hold: HeldLock): ScriptCall {
    return {
      script: luaScripts['read-write-lock/write-abandon'],
      keys: [hold.key],
      args: [hold.channel, hold.field],
    };
  },
  forceRelease,
};
