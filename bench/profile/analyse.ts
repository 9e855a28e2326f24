// From the files a profile run's workers wrote (heap snapshots, CPU profiles) to the figures of
// bench/results/profile.json: bytes per waiter by type and by allocating code, µs per cycle by
// category and by function.
import { emptyTally, tallyProfile, type Window } from './cpu-profile.js';
import { readAllocationSites } from './heap-sampling.js';
import { diffSnapshots, readHeapSnapshot } from './heap-snapshot.js';
import type { CpuFunction, CpuRole, HeapShare, HeapSite, HeapType } from './model.js';
import { CATEGORIES, type Category, type Origins } from './origins.js';

/** Types listed per heap pass, and functions per CPU role. */
const TOP_TYPES = 30;
const TOP_SITES = 10;
const TOP_FUNCTIONS = 40;

const round = (value: number, digits = 1): number => Math.round(value * 10 ** digits) / 10 ** digits;

/** The largest entry of `shares` with its share of their sum, e.g. `Map.table (93%)`. */
function leading(shares: ReadonlyMap<string, number> | undefined): string {
  if (shares === undefined || shares.size === 0) return '';
  let sum = 0;
  let best: [string, number] = ['', -1];
  for (const [key, bytes] of shares) {
    sum += bytes;
    if (bytes > best[1]) best = [key, bytes];
  }
  return `${best[0]} (${sum === 0 ? 100 : Math.round((100 * best[1]) / sum)}%)`;
}

export interface HeapShareInput {
  /** Held keys, or waiters: what the bytes are divided by. */
  readonly count: number;
  /** The scenario's measure (used heap after GC), in bytes, for all of them. */
  readonly measured: number;
  /** The snapshots before and after. */
  readonly before: string;
  readonly after: string;
  /** The sampling heap profile taken between them. */
  readonly sampled: string;
}

/** What the objects added between two snapshots are, per held key or waiter. */
export function heapShareOf(input: HeapShareInput, origins: Origins): HeapShare {
  const diff = diffSnapshots(readHeapSnapshot(input.before), readHeapSnapshot(input.after));
  const per = (bytes: number): number => round(bytes / input.count);
  const types = new Set([...diff.added.keys(), ...diff.gone.keys()]);
  const rows: HeapType[] = [...types].map((type) => {
    const added = diff.added.get(type);
    const gone = diff.gone.get(type)?.bytes ?? 0;
    return {
      type,
      objects: round((added?.count ?? 0) / input.count, 2),
      added: per(added?.bytes ?? 0),
      gone: per(gone),
      net: per((added?.bytes ?? 0) - gone),
      heldBy: leading(diff.heldBy.get(type)),
    };
  });
  rows.sort((a, b) => b.net - a.net);
  const top = rows.slice(0, TOP_TYPES);
  const rest = rows.slice(TOP_TYPES);
  const sum = (list: readonly HeapType[], key: 'added' | 'gone' | 'net' | 'objects'): number =>
    round(
      list.reduce((total, row) => total + row[key], 0),
      key === 'objects' ? 2 : 1,
    );
  if (rest.length > 0)
    top.push({
      type: `(${rest.length} other types)`,
      objects: sum(rest, 'objects'),
      added: sum(rest, 'added'),
      gone: sum(rest, 'gone'),
      net: sum(rest, 'net'),
      heldBy: '',
    });
  const sampled = readAllocationSites(input.sampled, origins);
  const byCategory: Partial<Record<Category, number>> = {};
  const sites: HeapSite[] = [];
  for (const [site, { category, bytes }] of sampled.sites) {
    byCategory[category] = (byCategory[category] ?? 0) + bytes;
    sites.push({ site, category, bytes: per(bytes) });
  }
  for (const category of Object.keys(byCategory) as Category[])
    byCategory[category] = per(byCategory[category] ?? 0);
  sites.sort((a, b) => b.bytes - a.bytes);
  const added = [...diff.added.values()].reduce((total, tally) => total + tally.bytes, 0);
  const gone = [...diff.gone.values()].reduce((total, tally) => total + tally.bytes, 0);
  return {
    measured: per(input.measured),
    snapshotDelta: per(diff.totalAfter - diff.totalBefore),
    added: per(added),
    gone: per(gone),
    types: top,
    sampled: per(sampled.total),
    byCategory,
    sites: sites.slice(0, TOP_SITES),
  };
}

/** One process's share of a contender's cycles: its CPU profile's samples inside `windows`, per cycle. */
export function cpuRoleOf(
  role: string,
  profile: string,
  windows: readonly Window[],
  cycles: number,
  origins: Origins,
): CpuRole {
  const tally = emptyTally();
  tallyProfile(profile, windows, origins, tally);
  const perCycle = (us: number): number => round(us / cycles, 2);
  const perCategory = (table: Record<Category, number>): Record<Category, number> =>
    Object.fromEntries(CATEGORIES.map((category) => [category, perCycle(table[category])])) as Record<
      Category,
      number
    >;
  const functions: CpuFunction[] = [...tally.byFunction]
    .filter(([, entry]) => entry.category !== 'idle')
    .map(([label, entry]) => ({ label, category: entry.category, us: perCycle(entry.us) }))
    .sort((a, b) => b.us - a.us)
    .slice(0, TOP_FUNCTIONS);
  return {
    role,
    samples: tally.samples,
    categories: perCategory(tally.byCategory),
    callers: perCategory(tally.byCaller),
    functions,
    modules: Object.fromEntries(
      [...tally.byModule]
        .sort((a, b) => b[1] - a[1])
        .map(([module, time]): [string, number] => [module, perCycle(time)])
        .filter(([, time]) => time > 0),
    ),
  };
}
