// The shape of a benchmark run's results, as written to latest.json and read by the report.
import type { Metrics, Outcome } from './scenarios/common.js';

export interface Env {
  cpuModel: string;
  cores: number;
  node: string;
  redis: string;
  os: string;
  date: string;
  quick: boolean;
  loadAverage: number[];
  peerVersions: Record<string, string>;
  redisServer: string;
  processes: number;
  notes: string[];
}

/**
 * The figures of the previous results file (bench/results/latest.json as committed) that the
 * regression targets compare with: scenario -> contender -> metric, for the pairs in
 * {@link BASELINE_METRICS} only.
 */
export interface Baseline {
  /** Where it was read from, for the report. */
  readonly source: string;
  readonly date: string;
  readonly quick: boolean;
  readonly scenarios: Record<string, Record<string, Metrics>>;
}

/** The costs a run must not raise against the previous results: scenario -> metrics of latchkey's. */
export const BASELINE_METRICS: Readonly<Record<string, readonly string[]>> = {
  uncontended: ['roundTripsPerCycle', 'cmdsPerCycle', 'redisCpuUsPerCycle'],
  'contended-8': ['roundTripsPerAcq', 'cmdsPerAcq', 'redisCpuUsPerAcq'],
};

/** The baseline a run keeps of `previous` (see {@link Baseline}). */
export function baselineOf(previous: Results, source: string): Baseline {
  const scenarios: Record<string, Record<string, Metrics>> = {};
  for (const [scenario, names] of Object.entries(BASELINE_METRICS)) {
    const measured = previous.scenarios[scenario]?.['latchkey'];
    if (measured === undefined) continue;
    const kept: Metrics = {};
    for (const name of names) if (measured[name] !== undefined) kept[name] = measured[name];
    scenarios[scenario] = { latchkey: kept };
  }
  return { source, date: previous.env.date, quick: previous.env.quick, scenarios };
}

export interface Results {
  env: Env;
  /** The previous results the regression targets compare with; absent when there were none. */
  baseline?: Baseline;
  /** scenario -> contender -> metric -> number; runs that failed or were skipped are not here. */
  scenarios: Record<string, Record<string, Metrics>>;
  failed: Record<string, Record<string, { reason: string; metrics?: Metrics }>>;
  skipped: Record<string, Record<string, string>>;
  notes: Record<string, Record<string, string[]>>;
}

export function emptyResults(env: Env): Results {
  return { env, scenarios: {}, failed: {}, skipped: {}, notes: {} };
}

function slot<T>(table: Record<string, Record<string, T>>, scenario: string): Record<string, T> {
  table[scenario] ??= {};
  return table[scenario];
}

/** Records one outcome, replacing whatever an earlier run recorded for the same pair. */
export function record(results: Results, scenario: string, contender: string, outcome: Outcome): void {
  for (const table of [results.scenarios, results.failed, results.skipped, results.notes]) {
    const entries = (table as Record<string, Record<string, unknown>>)[scenario];
    if (entries !== undefined) delete entries[contender];
  }
  if (outcome.status === 'ok') {
    slot(results.scenarios, scenario)[contender] = outcome.metrics;
    if (outcome.notes !== undefined && outcome.notes.length > 0) {
      slot(results.notes, scenario)[contender] = outcome.notes;
    }
  } else if (outcome.status === 'failed') {
    slot(results.failed, scenario)[contender] =
      outcome.metrics === undefined
        ? { reason: outcome.reason }
        : { reason: outcome.reason, metrics: outcome.metrics };
  } else {
    slot(results.skipped, scenario)[contender] = outcome.reason;
  }
}
