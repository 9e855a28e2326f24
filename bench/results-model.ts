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

export interface Results {
  env: Env;
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
