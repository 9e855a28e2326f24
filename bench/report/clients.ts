// latchkey's reentrant lock on each client it takes, beside itself on node-redis: the figures of
// the report's "Clients" table. The uncontended cycle is timed by turns in one process (so the
// ratios compare like with like); the hand-off runs each client in its own pool of processes.
import type { Results } from '../results-model.js';
import { fmt, metric, ratio, x } from './common.js';

/** The contender of latchkey's lock on each client, node-redis (the reference) first. */
const CLIENTS: readonly { readonly contender: string; readonly client: string }[] = [
  { contender: 'latchkey', client: 'node-redis' },
  { contender: 'latchkey-ioredis', client: 'ioredis' },
  { contender: 'latchkey-iovalkey', client: 'iovalkey' },
  { contender: 'latchkey-glide', client: 'Valkey GLIDE' },
];

/** A table row per client measured in the run; none when no client but node-redis was. */
export function clientRows(results: Results): string[] {
  const m = (scenario: string, contender: string): number | undefined =>
    metric(results, scenario, contender, 'p50Ms');
  const measured = CLIENTS.filter(({ contender }) =>
    ['uncontended', 'handoff'].some(
      (scenario) =>
        results.scenarios[scenario]?.[contender] !== undefined ||
        results.failed[scenario]?.[contender] !== undefined,
    ),
  );
  if (!measured.some(({ contender }) => contender !== 'latchkey')) return [];
  const reference = (scenario: string): number | undefined => m(scenario, 'latchkey');
  /** A p50 and its ratio to node-redis's, or FAILED when this client failed the scenario. */
  const cells = (scenario: string, contender: string): string => {
    if (results.failed[scenario]?.[contender] !== undefined) return '**FAILED** | –';
    const p50 = m(scenario, contender);
    return `${fmt(p50)} ms | ${x(ratio(p50, reference(scenario)))}`;
  };
  return measured.map(
    ({ contender, client }) =>
      `| ${client} (\`${contender}\`) | ${cells('uncontended', contender)} | ${cells('handoff', contender)} |`,
  );
}

/** The report's "Clients" section, or nothing when no other client was measured. */
export function clientsTable(results: Results): string[] {
  const rows = clientRows(results);
  if (rows.length === 0) return [];
  return [
    '## Clients',
    '',
    "latchkey's reentrant lock on each client it takes, as a ratio to itself on node-redis in the same run. The uncontended cycle is timed by turns in one process with every other contender; the hand-off (the `handoff` scenario) runs each client in its own pool of processes, minutes apart, so its ratios carry the drift between pools (see handoff-paired).",
    '',
    '| client | uncontended p50 | vs node-redis | hand-off p50 | vs node-redis |',
    '|---|---:|---:|---:|---:|',
    ...rows,
    '',
  ];
}
