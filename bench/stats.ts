// Latency summaries (HdrHistogram), Jain's fairness index and the mutual-exclusion check.
import * as hdr from 'hdr-histogram-js';

export interface Latency {
  readonly count: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

const NS_PER_MS = 1e6;

/** Summarizes durations given in nanoseconds. */
export function latency(durationsNs: readonly number[]): Latency {
  const histogram = hdr.build({ lowestDiscernibleValue: 1, numberOfSignificantValueDigits: 3 });
  for (const value of durationsNs) histogram.recordValue(Math.max(1, Math.round(value)));
  const result = {
    count: durationsNs.length,
    p50Ms: histogram.getValueAtPercentile(50) / NS_PER_MS,
    p90Ms: histogram.getValueAtPercentile(90) / NS_PER_MS,
    p99Ms: histogram.getValueAtPercentile(99) / NS_PER_MS,
    maxMs: histogram.maxValue / NS_PER_MS,
  };
  histogram.destroy();
  return result;
}

/** Jain's fairness index: 1 when every contender got the same share, 1/n when one got all. */
export function jain(counts: readonly number[]): number {
  const sum = counts.reduce((a, b) => a + b, 0);
  const squares = counts.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 0 : (sum * sum) / (counts.length * squares);
}

/** A critical section: from acquire resolved to release called, in ns on the shared clock. */
export type Interval = readonly [start: number, end: number];

/**
 * Counts critical sections that began before an earlier one (from any process) had ended.
 * CLOCK_MONOTONIC (process.hrtime) is one clock for every process on the machine.
 */
export function overlaps(intervals: readonly Interval[]): number {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let count = 0;
  let maxEnd = Number.NEGATIVE_INFINITY;
  for (const [start, end] of sorted) {
    if (start < maxEnd) count += 1;
    maxEnd = Math.max(maxEnd, end);
  }
  return count;
}

/** The most critical sections open at one instant (a semaphore's holders at once). */
export function maxConcurrent(intervals: readonly Interval[]): number {
  const edges = intervals.flatMap(([start, end]) => [
    [start, 1],
    [end, -1],
  ]);
  // At one instant an end comes before a start: a permit given back and taken again is not two.
  edges.sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0) || (a[1] ?? 0) - (b[1] ?? 0));
  let open = 0;
  let most = 0;
  for (const [, step] of edges) {
    open += step ?? 0;
    most = Math.max(most, open);
  }
  return most;
}

export function round(value: number, digits = 3): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
