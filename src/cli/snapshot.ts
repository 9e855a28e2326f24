import type { Connection } from './connection.js';
import { layoutOf, recognize } from './layouts/index.js';
import type { HolderLabels, LockKind, Snapshot } from './model.js';
import { readProbe } from './probe.js';

export type { Holder, HolderRole, LockKind, Permits, Snapshot, Waiter } from './model.js';
export { HolderLabels } from './model.js';
export { MAX_WAITERS_SHOWN } from './probe.js';

/** A snapshot without the queue's entries, as `list` and `watch` print it. @internal */
export function summary(snapshot: Snapshot): Omit<Snapshot, 'waiters'> {
  return Object.fromEntries(Object.entries(snapshot).filter(([field]) => field !== 'waiters')) as Omit<
    Snapshot,
    'waiters'
  >;
}

/** Whether `inspect` found one of the kinds there (rather than nothing, or something else). @internal */
export function isPresent(snapshot: Pick<Snapshot, 'kind'>): boolean {
  return snapshot.kind !== 'free' && snapshot.kind !== 'not-a-lock';
}

/** How to read a key. @internal */
export interface ReadOptions {
  /** Also each queued waiter, each reader's lease, and whether waiters still listen (inspect). */
  readonly details: boolean;
  /**
   * The kind the key is known to be (`--kind`, or what `watch` saw before): settles a `counter`
   * that may be it. A key recognised as another kind for sure is shown as what it is.
   */
  readonly hint?: LockKind;
  /** Channels this CLI itself listens on (watch): not counted as listeners. */
  readonly ownChannels?: ReadonlySet<string>;
}

/**
 * Reads the key `key` and tells its kind by its layout (src/cli/layouts), then reads what the
 * kind shows: holders (labelled), TTL, fencing token, mode, permits, count and wait queue.
 * @internal
 */
export async function readSnapshot(
  redis: Connection,
  name: string,
  key: string,
  labels: HolderLabels,
  options: ReadOptions,
): Promise<Snapshot> {
  const probe = await readProbe(redis, key, options);
  let layout = recognize(probe);
  let candidates = layout.candidates?.(probe) ?? [];
  if (options.hint !== undefined && candidates.includes(options.hint)) {
    layout = layoutOf(options.hint);
    candidates = [];
  }
  const state = await layout.read(probe, { redis, labels, details: options.details });
  return {
    name,
    key,
    kind: layout.kind,
    candidates,
    held: state.holders.length > 0,
    holders: state.holders,
    ttlMs: state.ttlMs === undefined ? (probe.pttl >= 0 ? probe.pttl : null) : state.ttlMs,
    fencingToken: probe.fencingToken,
    mode: state.mode ?? null,
    permits: state.permits ?? null,
    count: state.count ?? null,
    waiting: state.waiting ?? 0,
    waiters: state.waiters ?? [],
    redisType: probe.type,
  };
}
