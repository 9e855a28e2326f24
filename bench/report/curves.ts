// The scaling curves (contenders on one key; distinct keys), what each plots, and which of its
// costs should stay flat as the curve grows: shared by the report's tables and its charts.
import type { Results } from '../results-model.js';
import { CONTENDER_POINTS, KEY_POINTS, contenderPoint, keyPoint } from '../scaling-points.js';
import { fmt, x } from './common.js';

export interface CurveMetric {
  readonly key: string;
  readonly label: string;
  /** A cost per acquisition (or per key) that should not grow with the curve's x. */
  readonly flat?: {
    /** Largest max/min ratio over the points still called flat (measurement noise). */
    readonly within: number;
    /** Points below this x are left out of the verdict (e.g. heap per key at 1 key: noise). */
    readonly fromX?: number;
  };
}

export interface Curve {
  readonly id: 'contenders' | 'keys';
  readonly title: string;
  readonly x: string;
  readonly points: readonly number[];
  readonly scenario: (n: number) => string;
  readonly metrics: readonly CurveMetric[];
}

const COUNTS_FLAT = { within: 1.15 } as const;
const CPU_FLAT = { within: 1.5 } as const;

/** Every curve's wait and per-acquisition costs, between its throughput and its client-side figures. */
const PER_ACQUISITION: readonly CurveMetric[] = [
  { key: 'waitP50Ms', label: 'wait p50 ms' },
  { key: 'waitP99Ms', label: 'wait p99 ms' },
  { key: 'roundTripsPerAcq', label: 'round trips/acq', flat: COUNTS_FLAT },
  { key: 'cmdsPerAcq', label: 'Redis commands/acq', flat: COUNTS_FLAT },
  { key: 'redisCpuUsPerAcq', label: 'Redis CPU µs/acq', flat: CPU_FLAT },
];

export const CURVES: readonly Curve[] = [
  {
    id: 'contenders',
    title: 'Contenders on one key (over 4 processes, 1 ms hold)',
    x: 'contenders',
    points: CONTENDER_POINTS,
    scenario: contenderPoint,
    metrics: [
      { key: 'acqPerSec', label: 'acquisitions/s' },
      ...PER_ACQUISITION,
      { key: 'clientHeapKB', label: 'client heap KB (4 processes, whole)' },
      { key: 'subscriptions', label: 'subscribed channels' },
    ],
  },
  {
    id: 'keys',
    title: 'Distinct keys, one holder and one waiter each (hand-offs)',
    x: 'keys',
    points: KEY_POINTS,
    scenario: keyPoint,
    metrics: [
      { key: 'acqPerSec', label: 'hand-offs/s' },
      ...PER_ACQUISITION,
      { key: 'clientHeapBytesPerKey', label: 'client heap bytes/key', flat: { within: 1.25, fromX: 1_000 } },
      { key: 'subscriptions', label: 'subscribed channels' },
    ],
  },
];

/** "1 key", "1,000 keys". */
export function points(n: number, curve: Curve): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? curve.x.replace(/s$/, '') : curve.x}`;
}

/** max/min of the measured points of a metric from `fromX` on, with the points at each end. */
function spread(
  results: Results,
  curve: Curve,
  contender: string,
  metric: CurveMetric,
): { ratio: number; low: [number, number]; high: [number, number]; count: number } | undefined {
  const values = curve.points
    .filter((n) => n >= (metric.flat?.fromX ?? 0))
    .map((n) => [n, results.scenarios[curve.scenario(n)]?.[contender]?.[metric.key]] as const)
    .filter((entry): entry is readonly [number, number] => entry[1] !== undefined && entry[1] > 0);
  if (values.length < 2) return undefined;
  let low = values[0] as readonly [number, number];
  let high = low;
  for (const entry of values) {
    if (entry[1] < low[1]) low = entry;
    if (entry[1] > high[1]) high = entry;
  }
  return { ratio: high[1] / low[1], low: [...low], high: [...high], count: values.length };
}

/** A sentence per contender: which per-acquisition costs stay flat over the curve, from the data. */
export function flatness(results: Results, curve: Curve, contender: string): string | undefined {
  const flatOnes: string[] = [];
  const notFlat: string[] = [];
  for (const metric of curve.metrics.filter((m) => m.flat !== undefined)) {
    const s = spread(results, curve, contender, metric);
    if (s === undefined || metric.flat === undefined) continue;
    if (s.ratio <= metric.flat.within) flatOnes.push(`${metric.label} (within ${x(s.ratio)})`);
    else {
      const [first, last] = s.low[0] < s.high[0] ? [s.low, s.high] : [s.high, s.low];
      const grows = last === s.high;
      notFlat.push(
        `${metric.label} ${grows ? 'grows' : 'falls'} ${x(s.ratio)} (${fmt(first[1])} at ${points(first[0], curve)}, ${fmt(last[1])} at ${points(last[0], curve)}; flat means within ${x(metric.flat.within)})`,
      );
    }
  }
  if (flatOnes.length + notFlat.length === 0) return undefined;
  const measured = curve.points.filter(
    (n) => results.scenarios[curve.scenario(n)]?.[contender] !== undefined,
  );
  const range = `from ${measured[0]?.toLocaleString('en-US')} to ${points(measured[measured.length - 1] ?? 0, curve)}`;
  const parts = [`**${contender}**, ${range}:`];
  if (flatOnes.length > 0) parts.push(`flat: ${flatOnes.join(', ')}.`);
  if (notFlat.length > 0) parts.push(`Not flat: ${notFlat.join('; ')}.`);
  else parts.push('Every per-acquisition cost stays flat.');
  return parts.join(' ');
}

/** The contenders with an entry (measured, failed or skipped) at any point of the curve. */
export function curveContenders(results: Results, curve: Curve): string[] {
  const names = new Set<string>();
  for (const n of curve.points) {
    const scenario = curve.scenario(n);
    for (const table of [results.scenarios, results.failed, results.skipped])
      for (const name of Object.keys(table[scenario] ?? {})) names.add(name);
  }
  return [...names];
}
