// The targets of a run and their verdicts. Each target is a ratio measured within one run:
// latchkey against a floor (the least a client needs to do the same on Redis) or against the
// peers, never against a figure from another machine or another day.
import type { Results } from '../results-model.js';
import { PEERS, fmt, metric, ms, num, ratio, verdict, x, type Verdict } from './common.js';
import { heldLockTargets } from './targets-held.js';

/** The peers that wait by polling: latchkey's hand-off by pub/sub should beat them by far. */
const POLLING = ['redlock', 'sesame-redlock', 'redis-semaphore'] as const;
/** The hold of the contended scenarios, in ms (a 1 ms timer await; see contended.ts). */
const CONTENDED_HOLD_MS = 1;

/** A metric of the run: scenario, contender, metric name. */
type Lookup = (scenario: string, contender: string, name: string) => number | undefined;

/**
 * What each of `names` costs Redis per uncontended cycle (commands, a script's own calls
 * included, and CPU time), from the round-trip pass: where the time between a lock and the
 * fastest peer goes on the server.
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
 * Splits a ratio to a floor with floor-rlock, latchkey's own scripts sent by a bare client: what
 * the protocol costs against the floor, and what latchkey's client adds on top.
 */
function ownProtocol(
  latchkeyMs: number | undefined,
  rlockMs: number | undefined,
  floorName: string,
  floorMs: number | undefined,
): string {
  const protocol = ratio(rlockMs, floorMs);
  const client = ratio(latchkeyMs, rlockMs);
  if (protocol === undefined || client === undefined) return '';
  return `; latchkey's scripts by a bare client (floor-rlock) ${ms(rlockMs)} = ${x(protocol)} ${floorName}, and latchkey = ${x(client)} floor-rlock`;
}

/** The hand-off by turns before the JIT warm-up (handoff-paired's coldP50Ms), when measured. */
function coldPair(m: Lookup): string {
  const lk = m('handoff-paired', 'latchkey', 'coldP50Ms');
  const floor = m('handoff-paired', 'floor-pubsub', 'coldP50Ms');
  const r = ratio(lk, floor);
  return r === undefined ? '' : `; before the JIT warm-up: ${ms(lk)} / ${ms(floor)} = ${x(r)}`;
}

/** The uncontended cycle against its floor and against the fastest peer. */
function uncontendedTargets(m: Lookup): Verdict[] {
  const verdicts: Verdict[] = [];
  const uncLk = m('uncontended', 'latchkey', 'p50Ms');
  const uncFloor = m('uncontended', 'floor-2evalsha', 'p50Ms');
  const floorRatio = ratio(uncLk, uncFloor);
  verdicts.push(
    verdict(
      'uncontended p50 <= 1.15x floor-2evalsha',
      floorRatio === undefined ? undefined : floorRatio <= 1.15,
      `latchkey ${ms(uncLk)} / floor-2evalsha ${ms(uncFloor)} = ${x(floorRatio)} (needs <= 1.15x)${ownProtocol(
        uncLk,
        m('uncontended', 'floor-rlock', 'p50Ms'),
        'floor-2evalsha',
        uncFloor,
      )}`,
    ),
  );
  const peerUnc = PEERS.map((peer) => [peer, m('uncontended', peer, 'p50Ms')] as const).filter(
    (entry): entry is readonly [(typeof PEERS)[number], number] => entry[1] !== undefined,
  );
  const fastest = peerUnc.sort((a, b) => a[1] - b[1])[0];
  verdicts.push(
    verdict(
      'uncontended p50 no slower than the fastest peer',
      uncLk === undefined || fastest === undefined ? undefined : uncLk <= fastest[1],
      fastest === undefined
        ? `latchkey ${ms(uncLk)}; no peer measured`
        : `latchkey ${ms(uncLk)} vs ${fastest[0]} ${ms(fastest[1])} = ${x(ratio(uncLk, fastest[1]))}${uncontendedCosts(
            m,
            ['latchkey', fastest[0], 'floor-setnx', 'floor-2evalsha'],
          )}`,
    ),
  );
  return verdicts;
}

/**
 * The hand-off against its floor, the polling peers and node-redisson; also gives the floor's
 * hand-off p50 the contended target is bounded by.
 */
function handoffTargets(m: Lookup): { readonly verdicts: Verdict[]; readonly floorMs: number | undefined } {
  const verdicts: Verdict[] = [];
  const hoLk = m('handoff', 'latchkey', 'p50Ms');
  // The floor ratio from the pair timed by turns when it was measured (see handoff-paired).
  const pairLk = m('handoff-paired', 'latchkey', 'p50Ms');
  const pairFloor = m('handoff-paired', 'floor-pubsub', 'p50Ms');
  const paired = pairLk !== undefined && pairFloor !== undefined;
  const hoFloor = paired ? pairFloor : m('handoff', 'floor-pubsub', 'p50Ms');
  const hoRatio = paired ? ratio(pairLk, pairFloor) : ratio(hoLk, hoFloor);
  // Each pair of processes' own ratio, when the pairs were more than one.
  const pairRatios: string[] = [];
  for (let pair = 1; paired; pair += 1) {
    const r = ratio(
      m('handoff-paired', 'latchkey', `pair${pair}P50Ms`),
      m('handoff-paired', 'floor-pubsub', `pair${pair}P50Ms`),
    );
    if (r === undefined) break;
    pairRatios.push(x(r));
  }
  const redisLk = m('handoff-paired', 'latchkey', 'redisUsP50');
  const redisFloor = m('handoff-paired', 'floor-pubsub', 'redisUsP50');
  const redisOnPath =
    redisLk === undefined || redisFloor === undefined
      ? ''
      : `Redis's own time on the path (SLOWLOG pass, p50): latchkey ${num(redisLk)} µs, floor-pubsub ${num(redisFloor)} µs`;
  verdicts.push(
    verdict(
      'handoff p50 <= 1.2x floor-pubsub',
      hoRatio === undefined ? undefined : hoRatio <= 1.2,
      `${paired ? 'handoff-paired: ' : ''}latchkey ${ms(paired ? pairLk : hoLk)} / floor-pubsub ${ms(hoFloor)} = ${x(hoRatio)} (needs <= 1.20x)${pairRatios.length > 1 ? `; each pair of processes alone: ${pairRatios.join(', ')}` : ''}${coldPair(m)}${ownProtocol(
        paired ? pairLk : hoLk,
        m(paired ? 'handoff-paired' : 'handoff', 'floor-rlock', 'p50Ms'),
        'floor-pubsub',
        hoFloor,
      )}${redisOnPath === '' ? '' : `; ${redisOnPath}`}`,
    ),
  );
  for (const peer of POLLING) {
    const theirs = m('handoff', peer, 'p50Ms');
    const r = ratio(theirs, hoLk);
    verdicts.push(
      verdict(
        `handoff p50 >= 5x better than ${peer} (polling)`,
        r === undefined ? undefined : r >= 5,
        `${peer} ${ms(theirs)} / latchkey ${ms(hoLk)} = ${x(r)}`,
      ),
    );
  }
  const hoRedisson = m('handoff', 'node-redisson', 'p50Ms');
  verdicts.push(
    verdict(
      'handoff p50 no worse than node-redisson',
      hoLk === undefined || hoRedisson === undefined ? undefined : hoLk <= hoRedisson,
      `latchkey ${ms(hoLk)} vs node-redisson ${ms(hoRedisson)} = ${x(ratio(hoLk, hoRedisson))}`,
    ),
  );
  return { verdicts, floorMs: hoFloor };
}

/** The contended run on one key: throughput against the hand-off floor, round trips, costs, fairness. */
function contendedTargets(m: Lookup, hoFloor: number | undefined): Verdict[] {
  const verdicts: Verdict[] = [];
  // One acquisition per hold plus one pub/sub hand-off at the floor's speed: the most a lock
  // that wakes its next waiter by pub/sub can do on one key.
  const rateLk = m('contended-8', 'latchkey', 'acqPerSec');
  const bound = hoFloor === undefined ? undefined : 1000 / (CONTENDED_HOLD_MS + hoFloor);
  const rateRatio = ratio(rateLk, bound);
  verdicts.push(
    verdict(
      'contended-8 acquisitions/s >= 0.9x of 1 / (1 ms hold + floor-pubsub handoff p50)',
      rateRatio === undefined ? undefined : rateRatio >= 0.9,
      `latchkey ${num(rateLk)} acq/s / (1000 / (${CONTENDED_HOLD_MS} ms + ${ms(hoFloor)}) = ${num(
        bound === undefined ? undefined : Math.round(bound * 10) / 10,
      )} acq/s) = ${x(rateRatio)} (needs >= 0.90x)`,
    ),
  );

  const rtLk = m('contended-8', 'latchkey', 'roundTripsPerAcq');
  verdicts.push(
    verdict(
      'contended-8 roundTripsPerAcq <= 2',
      rtLk === undefined ? undefined : rtLk <= 2,
      `latchkey ${num(rtLk)}`,
    ),
  );
  const rtPeers = PEERS.map((peer) => [peer, m('contended-8', peer, 'roundTripsPerAcq')] as const).filter(
    (entry): entry is readonly [(typeof PEERS)[number], number] => entry[1] !== undefined,
  );
  const lowestPeer = [...rtPeers].sort((a, b) => a[1] - b[1])[0];
  verdicts.push(
    verdict(
      'contended-8 roundTripsPerAcq lowest of all contenders (floors do not run contended)',
      rtLk === undefined || lowestPeer === undefined ? undefined : rtLk <= lowestPeer[1],
      `latchkey ${num(rtLk)}; ${
        rtPeers.length === 0
          ? 'no peer measured'
          : rtPeers.map(([peer, value]) => `${peer} ${fmt(value)}`).join(', ')
      }`,
    ),
  );
  for (const name of ['cmdsPerAcq', 'redisCpuUsPerAcq']) {
    const ours = m('contended-8', 'latchkey', name);
    const theirs = m('contended-8', 'node-redisson', name);
    const r = ratio(ours, theirs);
    verdicts.push(
      verdict(
        `contended-8 ${name} <= 1/3 of node-redisson's`,
        r === undefined ? undefined : r <= 1 / 3,
        `latchkey ${num(ours)} / node-redisson ${num(theirs)} = ${x(r)} (needs <= 0.33x)`,
      ),
    );
  }
  const jainLk = m('contended-8', 'latchkey', 'jain');
  verdicts.push(
    verdict(
      'contended-8 jain >= 0.9',
      jainLk === undefined ? undefined : jainLk >= 0.9,
      `latchkey ${num(jainLk)}`,
    ),
  );
  return verdicts;
}

/** Every target's verdict for a run, in the order the report lists them. */
export function targets(results: Results): Verdict[] {
  const m: Lookup = (scenario, contender, name) => metric(results, scenario, contender, name);
  const handoff = handoffTargets(m);
  return [
    ...uncontendedTargets(m),
    ...handoff.verdicts,
    ...contendedTargets(m, handoff.floorMs),
    ...heldLockTargets(results),
  ];
}
