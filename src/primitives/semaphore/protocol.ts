import { REPLY, ScriptCall, yesOrNo, type ReplyReader } from '../../engine/index.js';
import { luaScripts } from '../../scripts/generated.js';

/**
 * The semaphore's scripts and what their replies mean, in one place: Redisson's RSemaphore
 * layout (a string counter of free permits, no owner, no TTL; the new count published on
 * `redisson_sc:{<key>}`), with a request key beside every call that changes the counter so a
 * copy of a call whose reply was lost changes nothing.
 * @internal
 */

/** Reply status of semaphore/acquire.lua (a cancelled request answers the shared cancelled code). */
const TAKEN = 1;
const TOO_FEW = 0;

/** Where a semaphore lives: its counter and its channel. @internal */
export interface SemaphoreTarget {
  readonly name: string;
  readonly key: string;
  readonly channel: string;
  /** The count a missing counter is created with, as text; empty: none (Redisson's default). */
  readonly initial: string;
}

/** What one acquire request found. @internal */
export type AcquireReply =
  | { readonly status: 'taken'; readonly free: number }
  | { readonly status: 'too-few'; readonly free: number }
  | { readonly status: 'cancelled' };

/** Takes `permits` if that many are free, recording the outcome under `requestKey`. */
export function acquireCall(
  target: SemaphoreTarget,
  requestKey: string,
  permits: number,
  recordTtlMs: number,
): ScriptCall<AcquireReply> {
  return new ScriptCall(
    luaScripts['semaphore/acquire'],
    [target.key, requestKey],
    [String(permits), target.initial, String(recordTtlMs), target.channel],
    acquireReply,
  );
}

/** Reads semaphore/acquire.lua's reply; undefined for a reply it never gives. */
function acquireReply(reply: unknown): AcquireReply | undefined {
  if (!Array.isArray(reply) || reply.length !== 2) return undefined;
  const status = Number(reply[0]);
  const free = Number(reply[1]);
  if (!Number.isSafeInteger(free)) return undefined;
  if (status === TAKEN) return { status: 'taken', free };
  if (status === TOO_FEW) return { status: 'too-few', free };
  if (status === REPLY.ACQUIRE_CANCELLED) return { status: 'cancelled' };
  return undefined;
}

/** A script that changes the count by `permits` once per `requestKey`, recording its reply. */
function countChange<R>(
  script: ScriptCall['script'],
  target: SemaphoreTarget,
  requestKey: string,
  permits: number,
  recordTtlMs: number,
  read: ReplyReader<R>,
): ScriptCall<R> {
  return new ScriptCall(
    script,
    [target.key, requestKey],
    [String(permits), String(recordTtlMs), target.channel],
    read,
  );
}

/** Refuses every copy of the acquire `requestKey` and gives back what it took, if anything. */
export function cancelAcquireCall(
  target: SemaphoreTarget,
  requestKey: string,
  permits: number,
  recordTtlMs: number,
): ScriptCall<boolean> {
  return countChange(
    luaScripts['semaphore/cancel-acquire'],
    target,
    requestKey,
    permits,
    recordTtlMs,
    yesOrNo,
  );
}

/** A release (permits > 0) or `addPermits` (any sign): the reply is the new count. */
export function addCall(
  target: SemaphoreTarget,
  requestKey: string,
  permits: number,
  recordTtlMs: number,
): ScriptCall<number> {
  return countChange(luaScripts['semaphore/add'], target, requestKey, permits, recordTtlMs, integerReply);
}

/** Sets the count if the counter is missing, once per `requestKey`: the reply is 1 (set) or 0. */
export function trySetCall(
  target: SemaphoreTarget,
  requestKey: string,
  permits: number,
  recordTtlMs: number,
): ScriptCall<boolean> {
  return countChange(luaScripts['semaphore/try-set'], target, requestKey, permits, recordTtlMs, yesOrNo);
}

/** Takes every free permit, once per `requestKey`: the reply is how many. */
export function drainCall(
  target: SemaphoreTarget,
  requestKey: string,
  recordTtlMs: number,
): ScriptCall<number> {
  return new ScriptCall(
    luaScripts['semaphore/drain'],
    [target.key, requestKey],
    [String(recordTtlMs)],
    integerReply,
  );
}

/**
 * Refuses every copy of the drain `requestKey` and gives back what it took, if anything: the
 * drain's own record says how many.
 */
export function cancelDrainCall(
  target: SemaphoreTarget,
  requestKey: string,
  recordTtlMs: number,
): ScriptCall<number> {
  return new ScriptCall(
    luaScripts['semaphore/cancel-drain'],
    [target.key, requestKey],
    [String(recordTtlMs), target.channel],
    integerReply,
  );
}

/** Deletes the counter: the reply is 1 when it existed, else 0. */
export function deleteCall(target: SemaphoreTarget): ScriptCall<boolean> {
  return new ScriptCall(luaScripts['semaphore/delete'], [target.key], [], yesOrNo);
}

/** Reads the free count, creating a missing counter with the target's initial count, if any. */
export function availableCall(target: SemaphoreTarget): ScriptCall<number> {
  return new ScriptCall(
    luaScripts['semaphore/available'],
    [target.key],
    [target.initial, target.channel],
    integerReply,
  );
}

/** An integer reply of one of the scripts, or undefined when it is not one. */
function integerReply(reply: unknown): number | undefined {
  const value = Number(reply);
  return reply !== null && Number.isSafeInteger(value) ? value : undefined;
}

/**
 * How many permits a message on the channel announces: Redisson publishes the new count as a
 * decimal number. Anything else counts as one, so an unknown publisher still wakes someone.
 */
export function announcedPermits(message: string): number {
  const value = Number(message);
  return message.trim() !== '' && Number.isSafeInteger(value) ? value : 1;
}

/**
 * The semaphore's wake policy: how many of a client's local waiters a message announcing free
 * permits wakes, the first asleep first. When every local acquire asks for the same number of
 * permits, as many as the free permits can serve (a release of k single permits wakes k
 * waiters, not all). When they ask for different numbers, the order of the waiters says nothing
 * about who fits, so all of them try: none that fits sleeps through free permits, and those that
 * do not fit sleep again.
 */
export function permitWakes(message: string, demands: ReadonlyMap<number, number>): number {
  const free = announcedPermits(message);
  if (free <= 0) return 0;
  if (demands.size !== 1) return demands.size === 0 ? 1 : Number.POSITIVE_INFINITY;
  const [asked] = demands.keys();
  return Math.floor(free / (asked ?? 1));
}
