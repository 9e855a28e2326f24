import { ScriptCall } from '../../engine/index.js';
import { luaScripts } from '../../scripts/generated.js';

/** Reply of count-down-latch/try-set-count.lua when it set the count. */
const COUNT_SET = 1;
/** Reply of count-down-latch/try-set-count.lua when a latch already existed. */
const LATCH_EXISTS = 0;
/** Reply of count-down-latch/delete.lua when it deleted a latch. */
const DELETED = 1;
/** PTTL of a key without an expiry. */
const NO_EXPIRY = -1;

/** What one latch's scripts need: its key and channel. @internal */
export interface LatchTarget {
  readonly key: string;
  readonly channel: string;
}

/** What a read of the latch found: its count (0 when absent) and its key's PTTL. @internal */
export interface LatchState {
  readonly count: number;
  /** Milliseconds the key has left; `Infinity` when it has no expiry or does not exist. */
  readonly ttlMs: number;
}

/**
 * A stored count as a number (0 for a missing key, and for a count at or below zero);
 * `undefined` when it is not an integer (a key of someone else's).
 * @internal
 */
export function parseCount(value: unknown): number | undefined {
  if (value === null || value === undefined) return 0;
  const text = typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
  if (text === undefined || !/^-?\d+$/.test(text)) return undefined;
  // A count at or below zero means an open latch (Redisson deletes the key there).
  return Math.max(0, Number(text));
}

/** try-set-count.lua: whether the count was set; undefined for a reply the script never gives. */
function countSet(reply: unknown): boolean | undefined {
  const code = Number(reply);
  if (code === COUNT_SET) return true;
  if (code === LATCH_EXISTS) return false;
  return undefined;
}

/** What a count-down did. @internal */
export interface CountedDown {
  /** The count after it, never below zero: 0 once the latch is open. */
  readonly count: number;
  /** Whether it counted: false when no latch existed (or its count was already at zero). */
  readonly counted: boolean;
}

/** count-down.lua: the count after a count-down; undefined for a reply that is no integer. */
function countedDown(reply: unknown): CountedDown | undefined {
  const count = Number(reply);
  if (reply === null || reply === undefined || !Number.isInteger(count)) return undefined;
  return { count: Math.max(0, count), counted: count >= 0 };
}

/** state.lua: the count and the key's time left; undefined for a reply the script never gives. */
function stateOf(reply: unknown): LatchState | undefined {
  if (!Array.isArray(reply) || reply.length !== 2) return undefined;
  const count = parseCount(reply[0]);
  const pttl = Number(reply[1]);
  if (count === undefined || !Number.isInteger(pttl) || pttl < -2) return undefined;
  // -1: no expiry; -2: no key (then the count is 0 and nobody waits on the TTL).
  return { count, ttlMs: pttl === NO_EXPIRY || pttl < 0 ? Number.POSITIVE_INFINITY : pttl };
}

/** delete.lua: whether a latch was deleted. */
function deleted(reply: unknown): boolean | undefined {
  const code = Number(reply);
  if (code === DELETED) return true;
  if (code === 0) return false;
  return undefined;
}

/**
 * The count-down latch's calls, in Redisson's RCountDownLatch layout: a string counter
 * `<key>`, changes announced on `redisson_countdownlatch__channel__{<key>}` — `0` when it opens,
 * `1` when a count is set. latchkey's writes carry a request key, so a retried copy of a call
 * whose reply was lost is applied once. Each call reads its own reply.
 * @internal
 */
export const LATCH_PROTOCOL = {
  trySetCount(
    latch: LatchTarget,
    requestKey: string,
    count: number,
    ttlMs: number,
    recordTtlMs: number,
  ): ScriptCall<boolean> {
    return new ScriptCall(
      luaScripts['count-down-latch/try-set-count'],
      [latch.key, requestKey],
      [latch.channel, String(count), String(ttlMs), String(recordTtlMs)],
      countSet,
    );
  },
  countDown(latch: LatchTarget, requestKey: string, recordTtlMs: number): ScriptCall<CountedDown> {
    return new ScriptCall(
      luaScripts['count-down-latch/count-down'],
      [latch.key, requestKey],
      [latch.channel, String(recordTtlMs)],
      countedDown,
    );
  },
  state(latch: LatchTarget): ScriptCall<LatchState> {
    return new ScriptCall(luaScripts['count-down-latch/state'], [latch.key], [], stateOf);
  },
  delete(latch: LatchTarget): ScriptCall<boolean> {
    return new ScriptCall(luaScripts['count-down-latch/delete'], [latch.key], [latch.channel], deleted);
  },
} as const;
