import { ExitCode } from '../exit-codes.js';
import { more, row } from '../format.js';
import type { Probe } from '../probe.js';
import type { LockKind, Snapshot } from '../model.js';
import { holderParts, ttlText } from './common.js';
import { COUNT_DOWN_LATCH, COUNTER, numberIn, PERMIT_SEMAPHORE, SEMAPHORE } from './counters.js';
import { FAIR_LOCK, FENCED_LOCK, LOCK } from './hash-locks.js';
import { READ_WRITE_LOCK } from './read-write.js';
import type { Layout } from './types.js';

/** A random token as `SET NX PX` locks write it: hex, base64 or a UUID, 16 to 128 characters. */
const TOKEN = /^[A-Za-z0-9+/=_.:-]{16,128}$/;

/**
 * SimpleLock, redis-py's Lock, node-redlock: a string token that is no number, with a TTL (a
 * lock without one still has a token's shape). The token is never read out.
 */
const SIMPLE_LOCK: Layout = {
  kind: 'simple-lock',
  recognize: (probe) =>
    probe.type === 'string' &&
    numberIn(probe) === undefined &&
    probe.valueLength <= 128 &&
    (probe.pttl >= 0 || TOKEN.test(probe.value ?? '')),
  read: () => ({ holders: [{ label: null, holdCount: 1, role: 'token', leaseMs: null }] }),
  title: () => 'simple lock',
  rows: (snapshot) => [row('holders', '1'), '  held (the token is not shown)', row('ttl', ttlText(snapshot))],
  parts: holderParts,
  cells: () => ({ holders: '1', count: '-' }),
  unlock: {
    action: 'unlock',
    handle: (locks, name) => locks.simpleLock(name),
    effect:
      'Its holder loses it (a latchkey holder notices at its next renewal or when its lease ends), and waiters are told it is free.',
    nothingHeld: 'nobody holds it',
  },
};

/** No key: a free lock (a fenced lock's last token may be left). */
const FREE: Layout = {
  kind: 'free',
  recognize: (probe) => probe.type === 'none',
  read: () => ({ holders: [] }),
  title: () => 'free',
  rows: (snapshot) => [
    ...(snapshot.fencingToken === null ? [] : [row('token', `${snapshot.fencingToken} (last issued)`)]),
  ],
  parts: (snapshot) => (snapshot.fencingToken === null ? [] : [`token ${snapshot.fencingToken}`]),
  cells: () => ({ holders: '-', count: '-' }),
  unlock: {
    action: 'refuse',
    code: ExitCode.NO_LOCK,
    reason: (snapshot) =>
      `Nothing to unlock: lock ${JSON.stringify(snapshot.name)} is free (no key ${JSON.stringify(snapshot.key)}).`,
  },
};

/** Anything else: never read out, never touched. */
const NOT_A_LOCK: Layout = {
  kind: 'not-a-lock',
  recognize: () => true,
  read: () => ({ holders: [] }),
  title: (snapshot) => `not a lock (a ${snapshot.redisType})`,
  rows: (snapshot) => [
    more(
      snapshot.redisType === 'hash'
        ? 'its fields are not owner fields (<uuid>:<n> -> hold count), nor a read-write lock’s'
        : snapshot.redisType === 'string'
          ? 'neither a number (a semaphore’s or latch’s counter) nor a lock’s token'
          : 'latchkey keeps locks in hashes, tokens and counters in strings',
    ),
  ],
  parts: () => [],
  cells: () => ({ holders: '-', count: '-' }),
  unlock: {
    action: 'refuse',
    code: ExitCode.NO_LOCK,
    reason: (snapshot) =>
      `Not force-unlocking ${JSON.stringify(snapshot.key)}: it holds a ${snapshot.redisType}, which is not a lock.`,
  },
};

/**
 * Every kind's layout, in the order they are tried: a layout that another one's keys could pass
 * for comes first (a read-write lock's hash before a lock's, a fair or fenced lock before a plain
 * one, a permit semaphore's counter before a bare counter). A new kind is one entry here.
 * @internal
 */
export const LAYOUTS: readonly Layout[] = [
  READ_WRITE_LOCK,
  FAIR_LOCK,
  FENCED_LOCK,
  LOCK,
  PERMIT_SEMAPHORE,
  SIMPLE_LOCK,
  SEMAPHORE,
  COUNT_DOWN_LATCH,
  COUNTER,
  FREE,
  NOT_A_LOCK,
];

/** The layout the probe shows. @internal */
export function recognize(probe: Probe): Layout {
  return LAYOUTS.find((layout) => layout.recognize(probe)) ?? NOT_A_LOCK;
}

/** The layout of `kind`. @internal */
export function layoutOf(kind: LockKind): Layout {
  return LAYOUTS.find((layout) => layout.kind === kind) ?? NOT_A_LOCK;
}

/** The kinds `--kind` accepts: those a key can be. @internal */
export const NAMED_KINDS: readonly LockKind[] = LAYOUTS.map((layout) => layout.kind).filter(
  (kind) => kind !== 'counter' && kind !== 'free' && kind !== 'not-a-lock',
);

/** The kind as text, e.g. `lock (fenced)`. @internal */
export function kindText(snapshot: Snapshot): string {
  return layoutOf(snapshot.kind).title(snapshot);
}
