import type { ScriptCall } from '../../engine/index.js';
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

/**
 * The count-down latch's calls, in Redisson's RCountDownLatch layout: a string counter
 * `<key>`, changes announced on `redisson_countdownlatch__channel__{<key>}` — `0` when it opens,
 * `1` when a count is set. latchkey's writes carry a request key, so a retried copy of a call
 * whose reply was lost is applied once.
 * @internal
 */
export const LATCH_PROTOCOL = {
  trySetCount(
    latch: LatchTarget,
    requestKey: string,
    count: number,
    ttlMs: number,
    recordTtlMs: number,
  ): ScriptCall {
    return {
      script: luaScripts['count-down-latch/try-set-count'],
      keys: [latch.key, requestKey],
      args: [latch.channel, String(count), String(ttlMs), String(recordTtlMs)],
    };
  },
  /** Whether the count was set; undefined for a reply the script never gives. */
  trySetCountOutcome(reply: unknown): boolean | undefined {
    const code = Number(reply);
    if (code === COUNT_SET) return true;
    if (code === LATCH_EXISTS) return false;
    return undefined;
  },
  countDown(latch: LatchTarget, requestKey: string, recordTtlMs: number): ScriptCall {
    return {
      script: luaScripts['count-down-latch/count-down'],
      keys: [latch.key, requestKey],
      args: [latch.channel, String(recordTtlMs)],
    };
  },
  /** The count after a count-down, never below zero; undefined for a reply that is no integer. */
  countDownOutcome(reply: unknown): number | undefined {
    const count = Number(reply);
    if (reply === null || reply === undefined || !Number.isInteger(count)) return undefined;
    return Math.max(0, count);
  },
  /** Whether a count-down counted (a latch existed); a count-down that found none changed nothing. */
  countDownCounted(reply: unknown): boolean {
    return Number(reply) >= 0;
  },
  state(latch: LatchTarget): ScriptCall {
    return { script: luaScripts['count-down-latch/state'], keys: [latch.key], args: [] };
  },
  stateOutcome(reply: unknown): LatchState | undefined {
    if (!Array.isArray(reply) || reply.length !== 2) return undefined;
    const count = parseCount(reply[0]);
    const pttl = Number(reply[1]);
    if (count === undefined || !Number.isInteger(pttl) || pttl < -2) return undefined;
    // -1: no expiry; -2: no key (then the count is 0 and nobody waits on the TTL).
    return { count, ttlMs: pttl === NO_EXPIRY || pttl < 0 ? Number.POSITIVE_INFINITY : pttl };
  },
  delete(latch: LatchTarget): ScriptCall {
    return { script: luaScripts['count-down-latch/delete'], keys: [latch.key], args: [latch.channel] };
  },
  deleteOutcome(reply: unknown): boolean | undefined {
    const code = Number(reply);
    if (code === DELETED) return true;
    if (code === 0) return false;
    return undefined;
  },
} as const;
