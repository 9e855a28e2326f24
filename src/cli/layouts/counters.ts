import { ExitCode } from '../exit-codes.js';
import { more, row } from '../format.js';
import type { Probe } from '../probe.js';
import type { Holder, LockKind, Snapshot } from '../model.js';
import { holderParts, holderRows, ttlText } from './common.js';
import type { Layout } from './types.js';

/** A counter as the kinds write it: a whole number, in decimal. */
const INTEGER = /^-?\d{1,16}$/;
/** Redisson's score for a permit taken without a lease: it never ends. */
const PERMIT_NEVER_EXPIRES = 922337203685477;

/** The key's value when it is a string holding a whole number; else undefined. @internal */
export function numberIn(probe: Probe): number | undefined {
  if (probe.type !== 'string' || probe.value === null || probe.valueLength > 17) return undefined;
  return INTEGER.test(probe.value) ? Number(probe.value) : undefined;
}

/**
 * The kinds a counter may be, from what is beside it: a permit semaphore with no permit out
 * leaves only its counter, as a semaphore does; a latch is deleted at zero, so it holds 1 or
 * more; a lock's token has a TTL; and who listens on the semaphore's or the latch's channel.
 */
function counterCandidates(probe: Probe, value: number): LockKind[] {
  const kinds: LockKind[] = ['semaphore', 'permit-semaphore'];
  if (value >= 1) kinds.push('count-down-latch');
  if (probe.pttl >= 0) kinds.push('simple-lock');
  const { semaphore, latch } = probe.listeners;
  if (semaphore > 0 && latch === 0) return kinds.filter((kind) => kind !== 'count-down-latch');
  if (latch > 0 && semaphore === 0 && kinds.includes('count-down-latch')) return ['count-down-latch'];
  return kinds;
}

/** A counter with no permit out beside it, and the kinds it may be. */
function plainCounter(probe: Probe): LockKind[] | undefined {
  const value = numberIn(probe);
  return value === undefined || probe.permits.out > 0 ? undefined : counterCandidates(probe, value);
}

const KIND_WORDS: Readonly<Partial<Record<LockKind, string>>> = {
  semaphore: 'semaphore',
  'permit-semaphore': 'permit semaphore with no permit out',
  'count-down-latch': 'count-down latch',
  'simple-lock': 'lock whose token is a number',
};

function oneOf(kinds: readonly LockKind[]): string {
  const words = kinds.map((kind) => KIND_WORDS[kind] ?? kind);
  return words.length <= 1 ? words.join('') : `${words.slice(0, -1).join(', ')} or ${words.at(-1) ?? ''}`;
}

function ttlRows(snapshot: Snapshot): string[] {
  return snapshot.ttlMs === null ? [] : [row('ttl', ttlText(snapshot))];
}

function freeText(snapshot: Snapshot): string {
  const free = snapshot.permits?.free;
  return free === null || free === undefined ? '-' : String(free);
}

/** A counter is never held, so there is nothing force-unlock could hand back. */
function refuse(reason: (snapshot: Snapshot) => string): Layout['unlock'] {
  return { action: 'refuse', code: ExitCode.REFUSED, reason };
}

/**
 * PermitSemaphore and RPermitExpirableSemaphore: the counter of free permits, and the permits out
 * in `{<key>}:timeout` (permit id -> end of its lease, ms since the epoch). Only the counter is
 * left once no permit is out: then it looks like a {@link SEMAPHORE}.
 */
export const PERMIT_SEMAPHORE: Layout = {
  kind: 'permit-semaphore',
  recognize: (probe) => probe.permits.out > 0 && (probe.type === 'none' || numberIn(probe) !== undefined),
  read(probe, context) {
    const { out, first } = probe.permits;
    const lapsed = first.filter((permit) => permit.score <= probe.nowMs).length;
    const holders: Holder[] = first
      .filter((permit) => permit.score > probe.nowMs)
      .map((permit) => ({
        label: context.labels.label(permit.member),
        holdCount: 1,
        role: 'permit',
        leaseMs: permit.score >= PERMIT_NEVER_EXPIRES ? null : permit.score - probe.nowMs,
      }));
    const earliest = holders[0]?.leaseMs;
    return {
      holders,
      ttlMs: earliest ?? null,
      permits: { free: numberIn(probe) ?? null, out: out - lapsed, lapsed },
    };
  },
  title: () => 'permit semaphore',
  rows: (snapshot) => [
    row('free', freeText(snapshot)),
    ...holderRows(snapshot),
    ...(snapshot.permits !== null && snapshot.permits.lapsed > 0
      ? [more(`and ${snapshot.permits.lapsed} whose lease ended: given back by the next call`)]
      : []),
  ],
  parts: (snapshot) => [`free ${freeText(snapshot)}`, ...holderParts(snapshot)],
  cells: (snapshot) => ({ holders: String(snapshot.holders.length), count: freeText(snapshot) }),
  unlock: {
    action: 'unlock',
    handle: (locks, name) => locks.permitSemaphore(name),
    effect:
      'Every permit out is given back to the count of free permits: their holders lose them (a latchkey holder notices at its next renewal or when its lease ends; a Redisson holder of a permit without a lease is not told), and waiters are woken.',
    nothingHeld: 'no permit is out',
  },
};

/**
 * Semaphore and RSemaphore: a counter of free permits and nothing else, no owner and no TTL (a
 * permit semaphore with no permit out looks the same).
 */
export const SEMAPHORE: Layout = {
  kind: 'semaphore',
  recognize: (probe) =>
    plainCounter(probe)?.every((kind) => kind === 'semaphore' || kind === 'permit-semaphore') === true,
  candidates: () => ['semaphore', 'permit-semaphore'],
  read: (probe) => ({ holders: [], permits: { free: numberIn(probe) ?? null, out: 0, lapsed: 0 } }),
  title: () => 'semaphore',
  rows: (snapshot) => [
    row('free', `${freeText(snapshot)} permits`),
    more('holders are not recorded: a semaphore keeps only its count of free permits'),
    ...ttlRows(snapshot),
  ],
  parts: (snapshot) => [`free ${freeText(snapshot)}`],
  cells: (snapshot) => ({ holders: '-', count: freeText(snapshot) }),
  unlock: refuse(
    (snapshot) =>
      `Not force-unlocking semaphore ${JSON.stringify(snapshot.name)}: a semaphore records no holders, only its count of free permits (${freeText(snapshot)} now), so deleting it would let in as many new holders as still hold permits, beyond its limit. Holders give permits back with release(); change the count with addPermits() (latchkey's Semaphore or Redisson's RSemaphore). Permits that must come back when their holder dies need a permit semaphore.`,
  ),
};

/** CountDownLatch and RCountDownLatch: a counter of count-downs still to come, deleted at zero. */
export const COUNT_DOWN_LATCH: Layout = {
  kind: 'count-down-latch',
  recognize: (probe) => plainCounter(probe)?.join() === 'count-down-latch',
  read: (probe) => ({ holders: [], count: numberIn(probe) ?? 0 }),
  title: () => 'count-down latch',
  rows: (snapshot) => [
    row('count', String(snapshot.count ?? '-')),
    more('its waiters pass when the count reaches zero'),
    ...ttlRows(snapshot),
  ],
  parts: (snapshot) => [`count ${snapshot.count ?? '-'}`],
  cells: (snapshot) => ({ holders: '-', count: String(snapshot.count ?? '-') }),
  unlock: refuse(
    (snapshot) =>
      `Not force-unlocking count-down latch ${JSON.stringify(snapshot.name)}: a latch has no holders; its waiters pass when its count (${snapshot.count ?? '-'} now) reaches zero. To let them pass now, delete it with countDownLatch(name).delete() (Redisson: RCountDownLatch.delete()), or count it down with countDown().`,
  ),
};

/**
 * A whole number that may be a semaphore's, a permit semaphore's or a latch's counter (or a
 * lock's numeric token, with a TTL): Redis keeps nothing that tells them apart, so the CLI says so.
 */
export const COUNTER: Layout = {
  kind: 'counter',
  recognize: (probe) => plainCounter(probe) !== undefined,
  candidates: (probe) => plainCounter(probe) ?? [],
  read: (probe) => ({ holders: [], count: numberIn(probe) ?? 0 }),
  title: (snapshot) => `counter: ${oneOf(snapshot.candidates)}`,
  rows: (snapshot) => [
    row('value', String(snapshot.count ?? '-')),
    more('nothing in Redis tells these kinds apart; --kind <kind> reads it as one of them'),
    ...ttlRows(snapshot),
  ],
  parts: (snapshot) => [`value ${snapshot.count ?? '-'}`],
  cells: (snapshot) => ({ holders: '-', count: String(snapshot.count ?? '-') }),
  unlock: refuse(
    (snapshot) =>
      `Not force-unlocking ${JSON.stringify(snapshot.name)}: it holds a counter (value ${snapshot.count ?? '-'}) that may be a ${oneOf(snapshot.candidates)}, and none of them has holders force-unlock could free. A semaphore's holders give permits back with release() (change its count with addPermits()); a latch's waiters pass when its count reaches zero (countDown(), or delete()). If you know which kind it is, say so with --kind <kind>.`,
  ),
};
