// Reads a V8 CPU profile (the JSON `Profiler.stop` returns) and adds up its samples' self time
// inside given windows of time (the cycles of one contender), by category and by function.
// A sample stands for the time from it to the next one, as Chrome's DevTools counts it. Each
// sample is also laid to the code that called into Node for it: the innermost function on its
// stack that is a library's or the benchmark's (a socket write to node-redis, an AbortSignal
// made for latchkey to latchkey).
import { readFileSync } from 'node:fs';
import { CATEGORIES, type Category, type Frame, type Origins } from './origins.js';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: Frame;
  readonly children?: readonly number[];
}

interface CpuProfileFile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** A stretch of time on the machine's monotonic clock, in µs (a profile's own clock). */
export interface Window {
  readonly startUs: number;
  readonly endUs: number;
}

/** Self time in µs inside the windows of one contender. */
export interface CpuTally {
  /** The windows' summed wall time (µs). */
  wallUs: number;
  samples: number;
  readonly byCategory: Record<Category, number>;
  /** By the category of the innermost library or benchmark function on the sample's stack. */
  readonly byCaller: Record<Category, number>;
  /** By function label; each function's category beside its time. */
  readonly byFunction: Map<string, { readonly category: Category; us: number }>;
  /** Node's own time by module (`node:internal/timers`, V8's builtins). */
  readonly byModule: Map<string, number>;
}

/** The categories of code that call into Node, to which {@link CpuTally.byCaller} lays samples. */
const CALLERS: ReadonlySet<Category> = new Set(['latchkey', 'latchkey deps', 'node-redis', 'bench']);

const zeros = (): Record<Category, number> =>
  Object.fromEntries(CATEGORIES.map((category) => [category, 0])) as Record<Category, number>;

export function emptyTally(): CpuTally {
  return {
    wallUs: 0,
    samples: 0,
    byCategory: zeros(),
    byCaller: zeros(),
    byFunction: new Map(),
    byModule: new Map(),
  };
}

/** For each node of the profile, the category it is laid to in {@link CpuTally.byCaller}. */
function callers(profile: CpuProfileFile, origins: Origins): Map<number, Category> {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  // The innermost caller on the way up from a node, or null when there is none.
  const memo = new Map<number, Category | null>();
  const callerOf = (id: number): Category | null => {
    const known = memo.get(id);
    if (known !== undefined) return known;
    const frame = frames.get(id);
    const own = frame === undefined ? undefined : origins.of(frame).category;
    const up = parent.get(id);
    const caller = own !== undefined && CALLERS.has(own) ? own : up === undefined ? null : callerOf(up);
    memo.set(id, caller);
    return caller;
  };
  const laid = new Map<number, Category>();
  for (const node of profile.nodes)
    laid.set(node.id, callerOf(node.id) ?? origins.of(node.callFrame).category);
  return laid;
}

/**
 * Adds the samples of the profile at `path` that fall inside `windows` (sorted or not, never
 * overlapping) to `tally`, with their windows' wall time.
 */
export function tallyProfile(
  path: string,
  windows: readonly Window[],
  origins: Origins,
  tally: CpuTally,
): void {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfileFile;
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const laid = callers(profile, origins);
  const sorted = [...windows].sort((a, b) => a.startUs - b.startUs);
  for (const window of sorted) tally.wallUs += window.endUs - window.startUs;
  let at = profile.startTime;
  let w = 0;
  for (let i = 0; i < profile.samples.length; i += 1) {
    at += profile.timeDeltas[i] ?? 0;
    const next = i + 1 < profile.samples.length ? at + (profile.timeDeltas[i + 1] ?? 0) : profile.endTime;
    while (w < sorted.length && (sorted[w]?.endUs ?? 0) <= at) w += 1;
    const window = sorted[w];
    if (window === undefined) break;
    if (at < window.startUs) continue;
    // The part of the sample's span that lies inside its window.
    const us = Math.max(0, Math.min(next, window.endUs) - at);
    const id = profile.samples[i] ?? -1;
    const frame = frames.get(id);
    if (frame === undefined) continue;
    const origin = origins.of(frame);
    tally.samples += 1;
    tally.byCategory[origin.category] += us;
    tally.byCaller[laid.get(id) ?? origin.category] += us;
    if (origin.category === 'node') {
      const module = frame.url === '' ? '(builtins and native bindings)' : frame.url;
      tally.byModule.set(module, (tally.byModule.get(module) ?? 0) + us);
    }
    const entry = tally.byFunction.get(origin.label);
    if (entry === undefined) tally.byFunction.set(origin.label, { category: origin.category, us });
    else entry.us += us;
  }
}
