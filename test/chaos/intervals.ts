/**
 * Overlap detection for critical sections recorded by several processes. Each process stamps
 * its sections with process.hrtime.bigint() (CLOCK_MONOTONIC on Linux, one clock for the whole
 * machine), so sections from different processes can be compared directly.
 *
 * A section is the closed interval [start, end]. Two sections overlap when one starts strictly
 * before the other ends; sections that merely touch (one ends at the very nanosecond the next
 * starts) do not count.
 */

export interface Interval {
  /** Monotonic nanoseconds when the section began (the lock was confirmed held). */
  readonly start: bigint;
  /** Monotonic nanoseconds when it ended (before the lock was given back). */
  readonly end: bigint;
  /** Who ran it, for messages: e.g. `pid 123 task 2 #7`. Never an owner token. */
  readonly who: string;
}

function sortedByStart(intervals: readonly Interval[]): Interval[] {
  for (const interval of intervals) {
    if (interval.end < interval.start) {
      throw new Error(`interval of ${interval.who} ends before it starts`);
    }
  }
  return [...intervals].sort((a, b) =>
    a.start === b.start ? (a.end < b.end ? -1 : a.end > b.end ? 1 : 0) : a.start < b.start ? -1 : 1,
  );
}

/**
 * How many sections start before some section that started no later has ended: 0 means the
 * sections ran strictly one at a time. Throws if a section ends before it starts.
 */
export function findOverlaps(intervals: readonly Interval[]): number {
  return overlaps(intervals, Number.POSITIVE_INFINITY).count;
}

/**
 * The first `limit` overlapping pairs (the section that was still running, then the one that
 * started inside it), and the total that findOverlaps() returns; for failure messages.
 */
export function overlaps(
  intervals: readonly Interval[],
  limit = 5,
): { count: number; pairs: [Interval, Interval][] } {
  const pairs: [Interval, Interval][] = [];
  let count = 0;
  // The section with the latest end among those started so far: any later start before that
  // end lies inside it.
  let longest: Interval | undefined;
  for (const current of sortedByStart(intervals)) {
    if (longest !== undefined && current.start < longest.end) {
      count += 1;
      if (pairs.length < limit) pairs.push([longest, current]);
    }
    if (longest === undefined || current.end > longest.end) longest = current;
  }
  return { count, pairs };
}

/** One line per pair, in microseconds relative to the earliest stamp, for assertion messages. */
export function describeOverlaps(pairs: readonly [Interval, Interval][]): string {
  const origin = pairs.reduce<bigint | undefined>(
    (min, [a]) => (min === undefined || a.start < min ? a.start : min),
    undefined,
  );
  const us = (ns: bigint): string => String((ns - (origin ?? 0n)) / 1_000n);
  return pairs
    .map(
      ([a, b]) =>
        `${a.who} [${us(a.start)}, ${us(a.end)}] us overlaps ${b.who} [${us(b.start)}, ${us(b.end)}] us`,
    )
    .join('\n');
}
