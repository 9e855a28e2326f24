// The Markdown report of a run (bench/results/latest.md): the environment, the targets, a table
// per latchkey kind, per client and per scenario, and the scaling curves with links to their charts.
import type { ProfileResults } from '../profile/model.js';
import type { Metrics } from '../scenarios/common.js';
import type { Results } from '../results-model.js';
import { isScalingPoint } from '../scaling-points.js';
import { clientsTable } from './clients.js';
import { fmt, x, type Verdict } from './common.js';
import { CURVES, curveContenders, flatness, points } from './curves.js';
import { DESCRIPTIONS, HOW_MEASURED, SCALING_DESCRIPTION } from './descriptions.js';
import { profileCauses, type ProfileTopic } from './profile-causes.js';
import { targets } from './targets.js';
import { kindVerdicts } from './targets-kinds.js';

/** The order of the scenario sections; any other scenario follows them. */
const SCENARIO_ORDER = [
  'uncontended',
  'uncontended-distinct',
  'handoff',
  'handoff-paired',
  'contended-8',
  'contended-32',
  'semaphore-4',
  'manyKeys-1000',
  'manyKeys-10000',
  'manyKeys-100000',
  'reentry',
];

/** The per-kind table: each kind's cycle against the floor, hand-off and throughput against its peer. */
function kindsTable(results: Results): string[] {
  const rows = kindVerdicts(results);
  if (rows.length === 0) return [];
  const lines = [
    '## Every kind',
    '',
    "Each latchkey kind driven as a mutex (a semaphore with one permit, a read-write lock's write lock), beside the floor of two EVALSHA calls and its closest peer (redis-semaphore's Semaphore and MultiSemaphore for the semaphores; no peer library has a fair or a read-write lock, so those are held against the floors and latchkey's own lock). `semaphore-4`: 8 contenders on 4 permits.",
    '',
    '| kind | cycle p50 | vs floor-2evalsha | handoff p50 | contended-8 acq/s | round trips/acq | semaphore-4 acq/s | verdict |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const row of rows)
    lines.push(
      `| ${row.kind} (\`${row.contender}\`) | ${fmt(row.cycleMs)} ms | ${x(row.vsFloor)} | ${fmt(row.handoffMs)} ms | ${fmt(row.acqPerSec)} | ${fmt(row.roundTrips)} | ${fmt(row.semaphoreAcqPerSec)} | ${row.verdict} |`,
    );
  lines.push('');
  return lines;
}

function scenarioTable(results: Results, scenario: string): string[] {
  const rows = results.scenarios[scenario] ?? {};
  const failed = results.failed[scenario] ?? {};
  const skipped = results.skipped[scenario] ?? {};
  const notes = results.notes[scenario] ?? {};
  const metricsOf = (entry: Metrics | undefined): string[] => Object.keys(entry ?? {});
  const columns = [
    ...new Set([
      ...Object.values(rows).flatMap(metricsOf),
      ...Object.values(failed).flatMap((entry) => metricsOf(entry.metrics)),
    ]),
  ];
  const lines = [`## ${scenario}`, '', DESCRIPTIONS[scenario] ?? '', ''];
  if (columns.length > 0) {
    lines.push(`| contender | status | ${columns.join(' | ')} |`);
    lines.push(`|---|---|${columns.map(() => '---:').join('|')}|`);
    for (const [contender, entry] of Object.entries(rows)) {
      lines.push(`| ${contender} | ok | ${columns.map((c) => fmt(entry[c])).join(' | ')} |`);
    }
    for (const [contender, entry] of Object.entries(failed)) {
      lines.push(`| ${contender} | **FAILED** | ${columns.map(() => '–').join(' | ')} |`);
      void entry;
    }
    lines.push('');
  }
  for (const [contender, entry] of Object.entries(failed))
    lines.push(`- **${contender} failed**: ${entry.reason}`);
  for (const [contender, reason] of Object.entries(skipped)) lines.push(`- ${contender} skipped: ${reason}`);
  for (const [contender, list] of Object.entries(notes))
    for (const note of list) lines.push(`- ${contender}: ${note}`);
  lines.push('');
  return lines;
}

/**
 * A target row's "measured" cell: its detail, and for a miss what the profile run says of it
 * (its causes in a few words and a link to bench/results/profile.md).
 */
function measured(
  v: Verdict,
  causes: Partial<Record<ProfileTopic, string>>,
  profile?: ProfileResults,
): string {
  const said = v.about === undefined ? undefined : causes[v.about];
  if (v.status !== 'miss' || said === undefined || profile === undefined) return v.detail;
  return `${v.detail}; **profile** ([profile.md](profile.md), ${profile.env.date.slice(0, 10)}): ${said}`;
}

/**
 * The whole report of a run, as bench/results/latest.md has it; with `profile` (a profile run's
 * results, bench/results/profile.json), each missed target it speaks to says what it found.
 */
export function renderMarkdown(results: Results, profile?: ProfileResults): string {
  const { env } = results;
  const causes = profile === undefined ? {} : profileCauses(profile, true);
  const lines = [
    '# latchkey benchmark results',
    '',
    `Written by \`npm run bench${env.quick ? ' -- --quick' : ''}\` on ${env.date}. ${env.quick ? '**Quick run**: smaller counts, shorter durations.' : 'Full run.'}`,
    'Runs that broke mutual exclusion or saw an unhandled rejection are reported as FAILED, never as numbers.',
    '',
    '## Environment',
    '',
    `- CPU: ${env.cpuModel}, ${env.cores} cores (load average at start: ${env.loadAverage.join(', ')})`,
    `- Node ${env.node}, Redis ${env.redis} (${env.redisServer}), ${env.os}`,
    `- Worker processes: ${env.processes}`,
    `- Versions: ${Object.entries(env.peerVersions)
      .map(([name, v]) => `${name} ${v}`)
      .join(', ')}`,
    ...env.notes.map((note) => `- ${note}`),
    '',
    '## Targets',
    '',
    '| target | result | measured |',
    '|---|---|---|',
    ...targets(results).map(
      (v) =>
        `| ${v.target} | ${v.status === 'pass' ? 'pass' : v.status === 'miss' ? '**miss**' : 'n/a'} | ${measured(v, causes, profile)} |`,
    ),
    '',
    ...kindsTable(results),
    ...clientsTable(results),
  ];
  const scenarios = new Set([
    ...Object.keys(results.scenarios),
    ...Object.keys(results.failed),
    ...Object.keys(results.skipped),
  ]);
  for (const scenario of [...SCENARIO_ORDER, ...scenarios]) {
    if (!scenarios.has(scenario)) continue;
    scenarios.delete(scenario);
    // The scaling points are one section of their own (below), not a table each.
    if (!isScalingPoint(scenario)) lines.push(...scenarioTable(results, scenario));
  }
  lines.push(...scalingMarkdown(results));
  lines.push('## How the numbers are taken', '', ...HOW_MEASURED, '');
  return `${lines.join('\n')}\n`;
}

/** The Markdown section of the scaling curves: a table per curve, the verdicts, the charts. */
function scalingMarkdown(results: Results): string[] {
  const curves = CURVES.filter((curve) => curveContenders(results, curve).length > 0);
  if (curves.length === 0) return [];
  const lines = ['## scaling', '', ...SCALING_DESCRIPTION.flatMap((text) => [text, ''])];
  for (const curve of curves) {
    lines.push(`### ${curve.title}`, '');
    lines.push(`| ${curve.x} | contender | status | ${curve.metrics.map((m) => m.label).join(' | ')} |`);
    lines.push(`|---:|---|---|${curve.metrics.map(() => '---:').join('|')}|`);
    const contenders = curveContenders(results, curve);
    const remarks: string[] = [];
    /** Skipped points leave no row: each contender's reasons are said once, below the table. */
    const skips = new Map<string, Set<string>>();
    for (const contender of contenders) {
      for (const n of curve.points) {
        const scenario = curve.scenario(n);
        const ok = results.scenarios[scenario]?.[contender];
        const failed = results.failed[scenario]?.[contender];
        const skipped = results.skipped[scenario]?.[contender];
        const values = ok ?? failed?.metrics;
        if (skipped !== undefined && ok === undefined && failed === undefined) {
          const reasons = skips.get(contender) ?? new Set<string>();
          reasons.add(skipped);
          skips.set(contender, reasons);
          continue;
        }
        if (ok === undefined && failed === undefined) continue;
        const status = ok !== undefined ? 'ok' : '**FAILED**';
        lines.push(
          `| ${n.toLocaleString('en-US')} | ${contender} | ${status} | ${curve.metrics
            .map((m) => (ok === undefined ? '–' : fmt(values?.[m.key])))
            .join(' | ')} |`,
        );
        const point = `${contender} at ${points(n, curve)}`;
        if (failed !== undefined) remarks.push(`- **${point} failed**: ${failed.reason}`);
        for (const note of results.notes[scenario]?.[contender] ?? []) remarks.push(`- ${point}: ${note}`);
      }
    }
    lines.push('');
    for (const contender of contenders) {
      const sentence = flatness(results, curve, contender);
      if (sentence !== undefined) lines.push(`- ${sentence}`);
    }
    for (const [contender, reasons] of skips)
      remarks.push(`- ${contender} skipped: ${[...reasons].join('; ')}`);
    lines.push(...remarks, '', `![${curve.title}](scaling-${curve.id}.svg)`, '');
  }
  return lines;
}
