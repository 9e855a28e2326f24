// The targets of a run and their verdicts. Each target is a ratio measured within one run:
// latchkey against a floor (the least a client needs to do the same on Redis) or against the
// peers, never against a figure from another machine or another day; only the regression rows
// compare with the previous results file (targets-regression.ts).
import type { Results } from '../results-model.js';
import { metric, ms, num, ratio, verdict, x, type Verdict } from './common.js';
import { contendedTargets } from './targets-contended.js';
import { heldLockTargets } from './targets-held.js';
import { regressionTargets } from './targets-regression.js';

/** The peers that wait by polling: latchkey's hand-off by pub/sub should beat them by far. */
const POLLING = ['redlock', 'sesame-redlock', 'redis-semaphore'] as const;
/** What latchkey's client may add to its own protocol (floor-rlock), as a ratio. */
const CLIENT_SHARE = 1.05;

/** A metric of the run: scenario, contender, metric name. */
export type Lookup = (scenario: string, contender: string, name: string) => number | undefined;

/**
 * What each of `names` costs Redis per uncontended cycle (commands, a script's own calls
 * included, and CPU time), from the round-trip pass.
 */
function uncontendedCosts(m: Lookup, names: readonly string[]): string {
  const parts = names.flatMap((name) => {
    const commands = m('uncontended', name, 'cmdsPerCycle');
    const cpu = m('uncontended', name, 'redisCpuUsPerCycle');
    return commands === undefined || cpu === undefined || commands < 0 || cpu < 0
      ? []
      : [`${name} ${num(commands)} commands, ${num(Math.round(cpu))} µs CPU`];
  });
  return parts.length === 0 ? '' : `; Redis per cycle: ${parts.join('; ')}`;
}

/**
 * The protocol's own share beside the client's: floor-rlock (latchkey's scripts sent by a bare
 * client) against the floor of the same operation, so a miss tells whose it is.
 */
function protocolShare(rlockMs: number | undefined, floorName: string, floorMs: number | undefined): string {
  const protocol = ratio(rlockMs, floorMs);
  return `; the protocol's own share: floor-rlock ${ms(rlockMs)} / ${floorName} ${ms(floorMs)} = ${x(protocol)}`;
}

/** latchkey's uncontended cycle against its own scripts sent by a bare client. */
function uncontendedTargets(m: Lookup): Verdict[] {
  const lk = m('uncontended', 'latchkey', 'p50Ms');
  const rlock = m('uncontended', 'floor-rlock', 'p50Ms');
  const r = ratio(lk, rlock);
  return [
    verdict(
      `uncontended p50 <= ${CLIENT_SHARE.toFixed(2)}x floor-rlock (the client adds <= 5% to its own protocol)`,
      r === undefined ? undefined : r <= CLIENT_SHARE,
      `latchkey ${ms(lk)} / floor-rlock ${ms(rlock)} = ${x(r)} (needs <= ${CLIENT_SHARE.toFixed(2)}x)${protocolShare(
        rlock,
        'floor-2evalsha',
        m('uncontended', 'floor-2evalsha', 'p50Ms'),
      )}${uncontendedCosts(m, ['latchkey', 'floor-rlock', 'floor-2evalsha'])}`,
      'uncontended',
    ),
  ];
}

/** The hand-off by turns before the JIT warm-up (handoff-paired's coldP50Ms), when measured. */
function coldPair(m: Lookup): string {
  const lk = m('handoff-paired', 'latchkey', 'coldP50Ms');
  const rlock = m('handoff-paired', 'floor-rlock', 'coldP50Ms');
  const r = ratio(lk, rlock);
  return r === undefined ? '' : `; before the JIT warm-up: ${ms(lk)} / ${ms(rlock)} = ${x(r)}`;
}

/** The hand-off against latchkey's own scripts by a bare client, the polling peers and node-redisson. */
function handoffTargets(m: Lookup): Verdict[] {
  const verdicts: Verdict[] = [];
  const hoLk = m('handoff', 'latchkey', 'p50Ms');
  // The pair timed by turns when it was measured (see handoff-paired); else each in its own pool.
  const pairLk = m('handoff-paired', 'latchkey', 'p50Ms');
  const pairRlock = m('handoff-paired', 'floor-rlock', 'p50Ms');
  const paired = pairLk !== undefined && pairRlock !== undefined;
  const scenario = paired ? 'handoff-paired' : 'handoff';
  const lk = paired ? pairLk : hoLk;
  const rlock = m(scenario, 'floor-rlock', 'p50Ms');
  const r = ratio(lk, rlock);
  // Each pair of processes' own ratio, when the pairs were more than one.
  const pairRatios: string[] = [];
  for (let pair = 1; paired; pair += 1) {
    const one = ratio(
      m('handoff-paired', 'latchkey', `pair${pair}P50Ms`),
      m('handoff-paired', 'floor-rlock', `pair${pair}P50Ms`),
    );
    if (one === undefined) break;
    pairRatios.push(x(one));
  }
  const redis = (name: string): number | undefined => m('handoff-paired', name, 'redisUsP50');
  const redisOnPath =
    redis('latchkey') === undefined || redis('floor-pubsub') === undefined
      ? ''
      : `; Redis's own time on the path (SLOWLOG pass, p50): latchkey ${num(redis('latchkey'))} µs, floor-rlock ${num(redis('floor-rlock'))} µs, floor-pubsub ${num(redis('floor-pubsub'))} µs`;
  verdicts.push(
    verdict(
      `hand-off p50 <= ${CLIENT_SHARE.toFixed(2)}x floor-rlock (the client adds <= 5% to its own protocol)`,
      r === undefined ? undefined : r <= CLIENT_SHARE,
      `${scenario}: latchkey ${ms(lk)} / floor-rlock ${ms(rlock)} = ${x(r)} (needs <= ${CLIENT_SHARE.toFixed(2)}x)${
        pairRatios.length > 1 ? `; each pair of processes alone: ${pairRatios.join(', ')}` : ''
      }${paired ? coldPair(m) : ''}${protocolShare(rlock, 'floor-pubsub', m(scenario, 'floor-pubsub', 'p50Ms'))}${redisOnPath}`,
      'handoff',
    ),
  );
  for (const peer of POLLING) {
    const theirs = m('handoff', peer, 'p50Ms');
    const slower = ratio(theirs, hoLk);
    verdicts.push(
      verdict(
        `hand-off p50 >= 5x better than ${peer} (polling)`,
        slower === undefined ? undefined : slower >= 5,
        `${peer} ${ms(theirs)} / latchkey ${ms(hoLk)} = ${x(slower)}`,
      ),
    );
  }
  const hoRedisson = m('handoff', 'node-redisson', 'p50Ms');
  verdicts.push(
    verdict(
      'hand-off p50 no worse than node-redisson',
      hoLk === undefined || hoRedisson === undefined ? undefined : hoLk <= hoRedisson,
      `latchkey ${ms(hoLk)} vs node-redisson ${ms(hoRedisson)} = ${x(ratio(hoLk, hoRedisson))}`,
    ),
  );
  return verdicts;
}

/** Every target's verdict for a run, in the order the report lists them. */
export function targets(results: Results): Verdict[] {
  const m: Lookup = (scenario, contender, name) => metric(results, scenario, contender, name);
  return [
    ...handoffTargets(m),
    ...uncontendedTargets(m),
    ...contendedTargets(m, results),
    ...heldLockTargets(results),
    ...regressionTargets(results),
  ];
}
