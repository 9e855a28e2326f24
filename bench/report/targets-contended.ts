// The targets of 8 contenders on one key (contended-8, 1 ms hold): latchkey's throughput against
// every peer's, its fairness and longest wait, and what an acquisition costs in requests, Redis
// commands and Redis CPU.
import type { Results } from '../results-model.js';
import { PEERS, fmt, ms, num, ratio, verdict, x, type Verdict } from './common.js';
import type { Lookup } from './targets.js';

const SCENARIO = 'contended-8';
/** Jain's index latchkey's waiters must reach: every contender served alike, to within 1%. */
const JAIN = 0.99;

/**
 * The peers' contenders measured in contended-8: every other library's, its semaphores
 * included (latchkey's own kinds and clients are not peers).
 */
function peersIn(results: Results): string[] {
  return Object.keys(results.scenarios[SCENARIO] ?? {}).filter((name) => !name.startsWith('latchkey'));
}

/** "name value, ..." of `name` for each contender, or "no peer measured". */
function listed(m: Lookup, contenders: readonly string[], name: string, unit = ''): string {
  const parts = contenders.flatMap((contender) => {
    const value = m(SCENARIO, contender, name);
    return value === undefined ? [] : [`${contender} ${fmt(value)}${unit}`];
  });
  return parts.length === 0 ? 'no peer measured' : parts.join(', ');
}

export function contendedTargets(m: Lookup, results: Results): Verdict[] {
  const verdicts: Verdict[] = [];
  const peers = peersIn(results);
  const failed = Object.keys(results.failed[SCENARIO] ?? {}).filter((name) => !name.startsWith('latchkey'));
  const failedNote = failed.length === 0 ? '' : `; failed, not compared: ${failed.join(', ')}`;

  const rateLk = m(SCENARIO, 'latchkey', 'acqPerSec');
  const best = peers
    .map((peer) => [peer, m(SCENARIO, peer, 'acqPerSec')] as const)
    .filter((entry): entry is readonly [string, number] => entry[1] !== undefined)
    .sort((a, b) => b[1] - a[1])[0];
  verdicts.push(
    verdict(
      "contended-8 (1 ms hold) acquisitions/s >= every peer's",
      rateLk === undefined || best === undefined ? undefined : rateLk >= best[1],
      `latchkey ${num(rateLk)} acq/s${
        best === undefined
          ? ''
          : ` / fastest peer ${best[0]} ${fmt(best[1])} = ${x(ratio(rateLk, best[1]))} (needs >= 1.00x)`
      }; peers: ${listed(m, peers, 'acqPerSec')}${failedNote}`,
    ),
  );

  const jainLk = m(SCENARIO, 'latchkey', 'jain');
  verdicts.push(
    verdict(
      `contended-8 Jain >= ${JAIN}`,
      jainLk === undefined ? undefined : jainLk >= JAIN,
      `latchkey ${num(jainLk)}; peers: ${listed(m, peers, 'jain')}`,
    ),
  );

  const waitLk = m(SCENARIO, 'latchkey', 'maxWaitMs');
  const shortest = peers
    .map((peer) => [peer, m(SCENARIO, peer, 'maxWaitMs')] as const)
    .filter((entry): entry is readonly [string, number] => entry[1] !== undefined)
    .sort((a, b) => a[1] - b[1])[0];
  verdicts.push(
    verdict(
      'contended-8 max wait the lowest of all contenders',
      waitLk === undefined || shortest === undefined ? undefined : waitLk <= shortest[1],
      `latchkey ${ms(waitLk)}${
        shortest === undefined ? '' : ` vs the lowest peer's, ${shortest[0]} ${ms(shortest[1])}`
      }; peers: ${listed(m, peers, 'maxWaitMs', ' ms')}${failedNote}`,
    ),
  );

  const rtLk = m(SCENARIO, 'latchkey', 'roundTripsPerAcq');
  const lowestRt = PEERS.map((peer) => m(SCENARIO, peer, 'roundTripsPerAcq')).filter(
    (value): value is number => value !== undefined,
  );
  verdicts.push(
    verdict(
      'contended-8 round trips per acquisition <= 2 and the lowest of all contenders',
      rtLk === undefined || lowestRt.length === 0 ? undefined : rtLk <= 2 && rtLk <= Math.min(...lowestRt),
      `latchkey ${num(rtLk)}; ${listed(m, PEERS, 'roundTripsPerAcq')}`,
    ),
  );
  for (const [name, label] of [
    ['cmdsPerAcq', 'Redis commands'],
    ['redisCpuUsPerAcq', 'Redis CPU'],
  ] as const) {
    const ours = m(SCENARIO, 'latchkey', name);
    const theirs = m(SCENARIO, 'node-redisson', name);
    const r = ratio(ours, theirs);
    verdicts.push(
      verdict(
        `contended-8 ${label} per acquisition <= 1/3 of node-redisson's`,
        r === undefined ? undefined : r <= 1 / 3,
        `latchkey ${num(ours)} / node-redisson ${num(theirs)} = ${x(r)} (needs <= 0.33x)`,
      ),
    );
  }
  return verdicts;
}
