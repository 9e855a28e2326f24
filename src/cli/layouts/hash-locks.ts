import { fairWaiterChannel } from '../../keys.js';
import { row } from '../format.js';
import type { Probe } from '../probe.js';
import type { Snapshot, Waiter } from '../model.js';
import { holderParts, holderRows, numsub, ownersOf, waiterRows } from './common.js';
import type { Layout, ReadContext } from './types.js';

/** A queue entry of latchkey's lock queue: `<ticket> <lease ms> <grant channel> <owner field>`. */
const QUEUE_ENTRY = /^(\S+) (\d+) (\S+) (.+)$/;

const HOLDERS_LOSE =
  'Its holders lose it (a latchkey holder notices at its next renewal or when its lease ends)';

/** Who listens on each of `channels` (one PUBSUB NUMSUB). */
async function listenersOn(context: ReadContext, channels: readonly string[]): Promise<Map<string, number>> {
  const unique = [...new Set(channels)];
  if (unique.length === 0) return new Map();
  return numsub(await context.redis.send(['PUBSUB', 'NUMSUB', ...unique]));
}

/** latchkey's wait queue of a lock: each entry's lease and whether its client still listens. */
async function lockQueueWaiters(probe: Probe, context: ReadContext): Promise<Waiter[]> {
  if (!context.details) return [];
  const parsed = probe.lockQueue.entries.map((entry) => QUEUE_ENTRY.exec(entry));
  const listeners = await listenersOn(
    context,
    parsed.flatMap((match) => (match?.[3] === undefined ? [] : [match[3]])),
  );
  return parsed.map((match, index) => {
    const channel = match?.[3];
    return {
      position: index + 1,
      leaseMs: match?.[2] === undefined ? null : Number(match[2]),
      deadlineMs: null,
      listening: channel === undefined ? null : (listeners.get(channel) ?? 0) > 0,
    };
  });
}

/** A fair lock's queue: each waiter's deadline (by Redis's clock) and whether it still listens. */
async function fairWaiters(probe: Probe, context: ReadContext): Promise<Waiter[]> {
  if (!context.details) return [];
  const { entries, deadlines, heartbeats } = probe.fairQueue;
  // Each waiter listens on a channel named after its owner field: asked about, never shown.
  const channels = entries.map((owner) => fairWaiterChannel(probe.key, owner));
  const listeners = await listenersOn(context, channels);
  return entries.map((owner, index) => {
    // A latchkey waiter also loses its place when it stops calling: whichever comes first.
    const times = [deadlines.get(owner), heartbeats.get(owner)].filter((time) => time !== undefined);
    const deadline = times.length === 0 ? undefined : Math.min(...times);
    return {
      position: index + 1,
      leaseMs: null,
      deadlineMs: deadline === undefined ? null : deadline - probe.nowMs,
      listening: (listeners.get(channels[index] ?? '') ?? 0) > 0,
    };
  });
}

function isOwnerHash(probe: Probe): boolean {
  return probe.type === 'hash' && ownersOf(probe.fields, undefined) !== undefined;
}

function lockRows(snapshot: Snapshot): string[] {
  return [
    ...(snapshot.fencingToken === null
      ? []
      : [row('token', snapshot.held ? snapshot.fencingToken : `${snapshot.fencingToken} (last issued)`)]),
    ...(snapshot.held ? holderRows(snapshot) : []),
    ...waiterRows(snapshot),
  ];
}

function lockParts(snapshot: Snapshot): string[] {
  return [
    ...holderParts(snapshot),
    ...(snapshot.fencingToken === null ? [] : [`token ${snapshot.fencingToken}`]),
    `waiting ${snapshot.waiting}`,
  ];
}

function lockCells(snapshot: Snapshot): { holders: string; count: string } {
  return { holders: snapshot.held ? String(snapshot.holders.length) : '-', count: '-' };
}

/** latchkey's Lock and Redisson's RLock: a hash of owner fields -> hold counts. */
export const LOCK: Layout = {
  kind: 'lock',
  recognize: isOwnerHash,
  async read(probe, context) {
    return {
      holders: ownersOf(probe.fields, context.labels) ?? [],
      waiting: probe.lockQueue.length,
      waiters: await lockQueueWaiters(probe, context),
    };
  },
  title: () => 'lock',
  rows: lockRows,
  parts: lockParts,
  cells: lockCells,
  unlock: {
    action: 'unlock',
    handle: (locks, name) => locks.lock(name),
    effect: `${HOLDERS_LOSE}, and the next waiter gets it.`,
    nothingHeld: 'nobody holds it',
  },
};

/** FencedLock and RFencedLock: the lock's hash, and `redisson_lock_token:{<key>}` beside it. */
export const FENCED_LOCK: Layout = {
  ...LOCK,
  kind: 'fenced-lock',
  recognize: (probe) => isOwnerHash(probe) && probe.fencingToken !== null,
  title: () => 'lock (fenced)',
  unlock: {
    action: 'unlock',
    handle: (locks, name) => locks.fencedLock(name),
    effect: `${HOLDERS_LOSE}, and the next waiter gets it with a new fencing token.`,
    nothingHeld: 'nobody holds it',
  },
};

/**
 * FairLock and RFairLock: the lock's hash, with `redisson_lock_queue:{<key>}` (owners in arrival
 * order) and `redisson_lock_timeout:{<key>}` (each owner's deadline) beside it. Nobody queued, it
 * looks like a {@link LOCK}; its queue without the hash is a fair lock being handed on.
 */
export const FAIR_LOCK: Layout = {
  kind: 'fair-lock',
  recognize: (probe) =>
    (isOwnerHash(probe) || probe.type === 'none') &&
    (probe.fairQueue.length > 0 || probe.fairQueue.timeouts > 0),
  async read(probe, context) {
    return {
      holders: ownersOf(probe.fields, context.labels) ?? [],
      waiting: probe.fairQueue.length,
      waiters: await fairWaiters(probe, context),
    };
  },
  title: () => 'fair lock',
  rows: (snapshot) => [
    ...(snapshot.held ? holderRows(snapshot) : [row('holders', '0')]),
    ...waiterRows(snapshot),
  ],
  parts: (snapshot) => [...holderParts(snapshot), `waiting ${snapshot.waiting}`],
  cells: lockCells,
  unlock: {
    action: 'unlock',
    handle: (locks, name) => locks.fairLock(name),
    effect: `${HOLDERS_LOSE}, and the first waiter in its queue is woken; the queue keeps its order.`,
    nothingHeld: 'its first waiter is taking it',
  },
};
