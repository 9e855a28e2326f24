// "Nothing else regresses": latchkey's round trips, Redis commands and Redis CPU per uncontended
// cycle and per contended acquisition, against the previous results file (the baseline the run
// kept of bench/results/latest.json as committed). The only targets read across runs: requests
// and commands are counts that do not depend on the machine's speed; CPU time does, and moves
// from one pass to the next, hence its wider margin.
import { BASELINE_METRICS, type Results } from '../results-model.js';
import { all, fmt, metric, ratio, verdict, x, type Verdict } from './common.js';

/** The most each figure may grow against the previous results, as a ratio. */
const MARGIN: Readonly<Record<string, number>> = {
  roundTripsPerCycle: 1.02,
  cmdsPerCycle: 1.02,
  redisCpuUsPerCycle: 1.15,
  roundTripsPerAcq: 1.02,
  cmdsPerAcq: 1.02,
  redisCpuUsPerAcq: 1.15,
};

const LABEL: Readonly<Record<string, string>> = {
  roundTripsPerCycle: 'round trips',
  cmdsPerCycle: 'commands',
  redisCpuUsPerCycle: 'Redis CPU µs',
  roundTripsPerAcq: 'round trips',
  cmdsPerAcq: 'commands',
  redisCpuUsPerAcq: 'Redis CPU µs',
};

const UNIT: Readonly<Record<string, string>> = {
  uncontended: 'per uncontended cycle',
  'contended-8': 'per contended-8 acquisition',
};

export function regressionTargets(results: Results): Verdict[] {
  const { baseline } = results;
  return Object.entries(BASELINE_METRICS).map(([scenario, names]) => {
    const target = `no regression ${UNIT[scenario] ?? `in ${scenario}`}: ${names
      .map((name) => `${LABEL[name] ?? name} <= ${(MARGIN[name] ?? 1).toFixed(2)}x`)
      .join(', ')} the previous results`;
    if (baseline === undefined)
      return verdict(target, undefined, 'n/a: no previous results file when this run was written');
    const parts = names.map((name) => {
      const now = metric(results, scenario, 'latchkey', name);
      const before = baseline.scenarios[scenario]?.['latchkey']?.[name];
      const r = ratio(now, before);
      const margin = MARGIN[name] ?? 1;
      return {
        ok: r === undefined ? undefined : r <= margin,
        text: `${LABEL[name] ?? name} ${fmt(now)} / ${fmt(before)} = ${x(r)}`,
      };
    });
    return verdict(
      target,
      all(...parts.map((part) => part.ok)),
      `latchkey now / previous: ${parts.map((part) => part.text).join('; ')}; previous: ${
        baseline.quick ? 'quick' : 'full'
      } run of ${baseline.date} (${baseline.source})`,
    );
  });
}
