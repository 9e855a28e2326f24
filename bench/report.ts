// Renders a run's results as Markdown (a table per scenario, the environment, the targets) and
// as a small hand-written SVG chart (handoff latency; round trips and commands per acquisition).
import type { Metrics } from './scenarios/common.js';
import type { Results } from './results-model.js';
import { CONTENDER_POINTS, KEY_POINTS, contenderPoint, isScalingPoint, keyPoint } from './scaling-points.js';

const PEERS = [
  'redlock',
  'sesame-redlock',
  'redis-semaphore',
  'node-redisson',
  'simple-redis-mutex',
] as const;
const POLLING = ['redlock', 'sesame-redlock', 'redis-semaphore'] as const;
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

const DESCRIPTIONS: Readonly<Record<string, string>> = {
  uncontended:
    "acquire + release of one key, one cycle after another. Every contender is measured in the same worker process over the same stretch of time, each with its own session (its own clients): after all have connected, the cycles run in blocks of 100 handed round-robin from contender to contender, the first contender moving one place each round; the first rounds are a warm-up and not recorded (2 of 8 quick, 10 of 60 full), the rest give 600 (quick) or 5,000 (full) cycles per contender. p50Ms/p99Ms: over all of a contender's recorded cycles; opsPerSec: its recorded cycles over the summed time of its own blocks. So machine noise and warm-up order fall on every contender alike and their p50s can be compared. A contender that throws or stalls (30 s per block) is failed alone and the others go on; an unhandled rejection counts against the contender whose step (connect, block, close) was running. roundTripsPerCycle: requests the client sent per cycle, counted by a proxy in a separate pass afterwards, one contender at a time; cmdsPerCycle and redisCpuUsPerCycle: in that pass, the Redis commands (a script's own calls included) and the Redis CPU time (INFO cpu) per cycle.",
  'uncontended-distinct': 'the same on a fresh key every cycle (same metric names).',
  handoff:
    "a holder in one process releases while a waiter in another is blocked in acquire (the parent waits for the waiter to report it called acquire, then 25 ms, 15 ms in a quick run); from the stamp right before release() to the stamp right after the waiter's acquire resolved. Polling peers are capped in time (target 500 handoffs full / 100 quick; polling peers stop after 90 s full / 5 s quick and need at least 200 / 20; the count measured is in the handoffs column). `floor-pubsub` is the floor of a hand-off by pub/sub: the holder's one EVALSHA gives the lock to the queued waiter and PUBLISHes, and the waiter in the other process is done when the message arrives. `floor-rlock` runs latchkey's own lock scripts (acquire, and release with the hand-over) on its key layout, sent by the least client that can use them (no hold counts, renewal, timeouts or retries): against floor-pubsub it shows what latchkey's protocol costs in Redis, and latchkey against it what latchkey's client adds.",
  'handoff-paired':
    "the handoff of latchkey and of floor-pubsub (and of floor-rlock, latchkey's own scripts sent by a bare client, when in the run), timed by turns in the same two worker processes over the same stretch of time: blocks of hand-offs (20 full, 10 quick) alternate between them, the first moving one place each round. Each pair of processes first runs a warm-up round or two, then a JIT warm-up: 2,000 untimed hand-offs per contender (600 quick), in blocks of 100 by turns, each released 1 ms after the waiter called acquire, so both contenders' code in both processes is what V8 compiles for a process that has been handing locks over for a while (a fresh process interprets each function until it has run often enough). coldP50Ms: in the first pair only, rounds timed between the two warm-ups (3 full, 2 quick), the same hand-off before the JIT warm-up. A full run does this in three pairs of fresh processes, one after the other (9 rounds each), and pools their hand-offs: 540 recorded hand-offs each (100 quick, one pair); pairNP50Ms is one pair's own p50. The same build's ratio to the floor differs from one pair of processes to the next by more than the target's margin, so one pair says too little. The handoff scenario measures each contender in its own worker pool, minutes apart, and on a shared machine its p50s drift between pools by more than that again; the hand-off targets use this scenario when it was measured. redisUsP50: after the timed rounds, in the last pair, 60 more hand-offs each (20 quick) with Redis's SLOWLOG logging every command: the p50 of what the commands sent between the release and the acquisition took to execute on the server (a script with its own calls), in µs; those hand-offs are not timed.",
  'contended-8':
    '8 contenders over 4 processes, one key, 1 ms hold (a real timer await), no think time, fixed duration after a common start. acqPerSec, jain, maxWaitMs from the timing pass; cmdsPerAcq (INFO commandstats delta, script-internal calls included, INFO itself excluded) and redisCpuUsPerAcq (used_cpu_user+sys delta) from the same pass; roundTripsPerAcq from a separate pass through a counting proxy (requests the clients sent), after a warm-up pass on the same key through the same proxy; warmupRoundTripsPerAcq: the same for the warm-up, which carries what a client does once per lock (loading its scripts, subscribing). giveUps: times the library gave up at its defaults and the adapter asked again.',
  'contended-32': 'the same with 32 contenders.',
  'semaphore-4':
    'the contended run for semaphores: 8 contenders over 4 processes share a semaphore of 4 permits, each acquisition taking one, 1 ms hold; a run that ever saw more than 4 holders at once fails.',
  'manyKeys-1000':
    "one session holds that many locks, a second session in the same process waits on each. subscriptions: server pubsub_channels delta; heapBytesPerLock: the client heap per held lock with its waiter, after GC, holder and waiter sessions summed (the harness's own reference to each hold and pending wait included), split into holderHeapBytesPerLock (measured once every lock is held, before any waiter) and waiterHeapBytesPerLock (the rest, measured after the window: the lowest of three samples 0.5 s apart, so requests in flight at one of them, such as waiters re-checking a lock at the expiry they last saw, are not counted as kept); renewCallsPerInterval: the holder session's requests (proxy) per renewal interval, with a 3 s lease/watchdog for contenders that renew (a long fixed lease otherwise), and renewCallsPer1000Locks the same per 1,000 held locks; serverCmdsPerSec: commands Redis executed per second in that window (INFO commandstats: renewals, polling waiters, script internals; the harness's PTTL samples left out); minPttlMs: the lowest PTTL of sampledKeys lock keys (spread over the held locks, each read every 100 ms through the window), a renewal being late when it falls to leaseMs - 2 x renewIntervalMs; sampledKeysGone: sampled keys found missing; holdsLost: holds the holder's library reported lost (latchkey's lockLost events); holdSeconds: time to take every lock; seconds: the whole point. Waiters connect directly, only the holder goes through the proxy. `floor-pubsub` is the heap's floor (a held lock is one key; a waiter one queued token, one subscribed channel and one pending promise): its heap per lock is what the harness and node-redis keep alone (in a quick run too, at 10,000 locks).",
  'manyKeys-10000': 'the same with 10,000 locks.',
  'manyKeys-100000':
    'the same with 100,000 locks, in a full run and for latchkey only, without waiters (holder session alone): it measures renewal of held locks. In a trial with a waiter on each, the one worker process grew past 3 GB and all 100,000 holds were lost.',
  reentry:
    'inside a held lock, take it again as the same owner and release the inner hold: p50 of that pair.',
};

function fmt(value: number | undefined): string {
  if (value === undefined) return '–';
  if (Number.isInteger(value)) return String(value);
  const abs = Math.abs(value);
  return abs >= 100 ? value.toFixed(1) : abs >= 1 ? value.toFixed(3) : value.toFixed(4);
}

function metric(results: Results, scenario: string, contender: string, name: string): number | undefined {
  return results.scenarios[scenario]?.[contender]?.[name];
}

type Verdict = { readonly target: string; readonly status: 'pass' | 'miss' | 'n/a'; readonly detail: string };

function verdict(target: string, ok: boolean | undefined, detail: string): Verdict {
  return { target, status: ok === undefined ? 'n/a' : ok ? 'pass' : 'miss', detail };
}

function ratio(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined || b === 0 ? undefined : a / b;
}

function x(value: number | undefined): string {
  return value === undefined ? 'n/a' : `${value.toFixed(2)}x`;
}

/** A number of a detail, or 'n/a' when it was not measured. */
function num(value: number | undefined): string {
  return value === undefined ? 'n/a' : fmt(value);
}

/** A duration of a detail in ms, or 'n/a' when it was not measured. */
function ms(value: number | undefined): string {
  return value === undefined ? 'n/a' : `${fmt(value)} ms`;
}

/** All parts hold: false as soon as one is known false, undefined while one is unknown. */
function all(...parts: (boolean | undefined)[]): boolean | undefined {
  if (parts.includes(false)) return false;
  return parts.includes(undefined) ? undefined : true;
}

/** The hold of the contended scenarios, in ms (a 1 ms timer await; see contended.ts). */
const CONTENDED_HOLD_MS = 1;
/** manyKeys sizes, largest first. */
const MANY_KEYS_SIZES = [100_000, 10_000, 1_000] as const;
/**
 * The minimal pub/sub waiter on node-redis, measured in manyKeys beside latchkey: its heap per
 * lock is what the harness and the client keep with no lock library around them.
 */
const HEAP_FLOOR = 'floor-pubsub';

/**
 * The renewal target at one manyKeys size: calls per 1,000 locks per interval, holds lost, and
 * the lowest sampled PTTL against lease - 2 x interval (a renewal that late would have left a
 * lock less than one interval of margin).
 */
function renewalOf(
  results: Results,
  size: number,
): { readonly measured: boolean; readonly ok: boolean | undefined; readonly detail: string } {
  const r = (name: string): number | undefined => metric(results, `manyKeys-${size}`, 'latchkey', name);
  const calls = r('renewCallsPerInterval');
  const perThousand = calls === undefined ? undefined : calls / (size / 1000);
  const lease = r('leaseMs');
  const interval = r('renewIntervalMs');
  const floor = lease === undefined || interval === undefined ? undefined : lease - 2 * interval;
  const minPttl = r('minPttlMs');
  const lost = r('holdsLost');
  const gone = r('sampledKeysGone');
  const ok = all(
    // No call at all means the holds were no longer renewed (lost), not a cheap watchdog.
    perThousand === undefined ? undefined : perThousand > 0 && perThousand <= 1,
    lost === undefined ? undefined : lost === 0,
    gone === undefined ? undefined : gone === 0,
    minPttl === undefined || floor === undefined ? undefined : minPttl > floor,
  );
  const detail = [
    `manyKeys-${size}: ${num(calls)} calls per ${ms(interval)} interval = ${num(
      perThousand === undefined ? undefined : Math.round(perThousand * 1000) / 1000,
    )} per 1,000 locks (needs > 0 and <= 1)`,
    `holds lost ${num(lost)}`,
    `lowest sampled PTTL ${ms(minPttl)} (needs > lease ${num(lease)} - 2 x ${num(interval)} = ${ms(
      floor,
    )}) over ${num(r('sampledKeys'))} keys, ${num(gone)} gone`,
  ].join('; ');
  return { measured: calls !== undefined, ok, detail };
}

/**
 * What each of `names` costs Redis per uncontended cycle (commands, a script's own calls
 * included, and CPU time), from the round-trip pass: where the time between a lock and the
 * fastest peer goes on the server.
 */
function uncontendedCosts(
  m: (scenario: string, contender: string, name: string) => number | undefined,
  names: readonly string[],
): string {
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
function coldPair(m: (scenario: string, contender: string, name: string) => number | undefined): string {
  const lk = m('handoff-paired', 'latchkey', 'coldP50Ms');
  const floor = m('handoff-paired', 'floor-pubsub', 'coldP50Ms');
  const r = ratio(lk, floor);
  return r === undefined ? '' : `; before the JIT warm-up: ${ms(lk)} / ${ms(floor)} = ${x(r)}`;
}

export function targets(results: Results): Verdict[] {
  const verdicts: Verdict[] = [];
  const m = (scenario: string, contender: string, name: string): number | undefined =>
    metric(results, scenario, contender, name);

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

  // Heap: the largest manyKeys point that measured it; every point has a waiter on each lock.
  const heapSize = MANY_KEYS_SIZES.find(
    (size) => m(`manyKeys-${size}`, 'latchkey', 'heapBytesPerLock') !== undefined,
  );
  const heapOf = (name: string): number | undefined =>
    heapSize === undefined ? undefined : m(`manyKeys-${heapSize}`, 'latchkey', name);
  const heap = heapOf('heapBytesPerLock');
  const holderHeap = heapOf('holderHeapBytesPerLock');
  const waiterHeap = heapOf('waiterHeapBytesPerLock');
  // The floor at the same point, for information only: the verdict is latchkey's whole figure.
  const floorOf = (name: string): number | undefined =>
    heapSize === undefined ? undefined : m(`manyKeys-${heapSize}`, HEAP_FLOOR, name);
  const floorHeap = floorOf('heapBytesPerLock');
  const floorHolder = floorOf('holderHeapBytesPerLock');
  const floorWaiter = floorOf('waiterHeapBytesPerLock');
  const floorDetail =
    floorHeap === undefined
      ? `${HEAP_FLOOR} n/a at the same point (not measured in this run)`
      : `${HEAP_FLOOR} at the same point: ${
          floorHolder === undefined || floorWaiter === undefined
            ? `${fmt(floorHeap)} B`
            : `holder ${fmt(floorHolder)} B + waiter ${fmt(floorWaiter)} B = ${fmt(floorHeap)} B`
        } (harness and node-redis alone)${
          heap === undefined
            ? ''
            : `; latchkey's own: ${fmt(heap)} - ${fmt(floorHeap)} = ${fmt(heap - floorHeap)} B`
        }`;
  verdicts.push(
    verdict(
      'client heap per held lock with a waiter <= 2 KB (holder + waiter sessions)',
      heap === undefined ? undefined : heap <= 2048,
      heapSize === undefined
        ? 'latchkey n/a (no manyKeys point measured the heap)'
        : holderHeap === undefined || waiterHeap === undefined
          ? `manyKeys-${heapSize}: latchkey ${num(heap)} B per lock, holder and waiter sessions mixed in one figure (not split in this run), judged as the sum per lock (needs <= 2048 B); ${floorDetail}`
          : `manyKeys-${heapSize}: latchkey holder ${fmt(holderHeap)} B + waiter ${fmt(waiterHeap)} B = ${num(heap)} B per lock, both sessions summed (needs <= 2048 B); ${floorDetail}`,
    ),
  );

  // Renewal: 100,000 locks in a full run; a quick run has no such point and is judged per
  // 1,000 locks on its largest one.
  const renewed = MANY_KEYS_SIZES.find(
    (size) => m(`manyKeys-${size}`, 'latchkey', 'renewCallsPerInterval') !== undefined,
  );
  const renewSize = results.env.quick ? renewed : 100_000;
  const renewal = renewSize === undefined ? undefined : renewalOf(results, renewSize);
  let renewDetail: string;
  if (renewal?.measured === true) renewDetail = renewal.detail;
  else if (renewed === undefined) renewDetail = 'latchkey n/a (no manyKeys point measured renewals)';
  else
    renewDetail = `manyKeys-${renewSize ?? 'n/a'} n/a (not measured in this run, or failed: see its section); for information, ${
      renewalOf(results, renewed).detail
    }`;
  verdicts.push(
    verdict(
      `${results.env.quick ? 'largest manyKeys point (quick run)' : '100,000 held locks'} renewed with <= 1 Redis call per 1,000 locks per interval, no renewal late`,
      renewal?.measured === true ? renewal.ok : undefined,
      renewDetail,
    ),
  );
  return verdicts;
}

/**
 * One latchkey kind beside its floor and its closest peer: which contender it is, what it is
 * held against, and the peer (if any library has one).
 */
const KIND_ROWS: readonly {
  readonly contender: string;
  readonly kind: string;
  readonly peers: readonly string[];
}[] = [
  {
    contender: 'latchkey',
    kind: 'lock (reentrant)',
    peers: ['node-redisson', 'redis-semaphore', 'redlock', 'sesame-redlock'],
  },
  {
    contender: 'latchkey-fenced',
    kind: 'fenced lock',
    peers: ['node-redisson', 'redlock', 'sesame-redlock'],
  },
  { contender: 'latchkey-simple', kind: 'simple lock', peers: ['simple-redis-mutex', 'redis-semaphore'] },
  { contender: 'latchkey-fair', kind: 'fair lock', peers: [] },
  { contender: 'latchkey-rw', kind: 'read-write lock (write)', peers: [] },
  { contender: 'latchkey-semaphore', kind: 'semaphore', peers: ['rs-semaphore', 'rs-multisemaphore'] },
  { contender: 'latchkey-permits', kind: 'permit semaphore', peers: ['rs-semaphore', 'rs-multisemaphore'] },
];

/** The per-kind table: each kind's cycle against the floor, hand-off and throughput against its peer. */
function kindsTable(results: Results): string[] {
  const m = (scenario: string, contender: string, name: string): number | undefined =>
    metric(results, scenario, contender, name);
  const floor = m('uncontended', 'floor-2evalsha', 'p50Ms');
  const rows = KIND_ROWS.filter((row) => results.scenarios['uncontended']?.[row.contender] !== undefined);
  if (rows.length === 0) return [];
  const lines = [
    '## Every kind',
    '',
    "Each latchkey kind driven as a mutex (a semaphore with one permit, a read-write lock's write lock), beside the floor of two EVALSHA calls and its closest peer (redis-semaphore's Semaphore and MultiSemaphore for the semaphores; no peer library has a fair or a read-write lock, so those are held against the floors and latchkey's own lock). `semaphore-4`: 8 contenders on 4 permits.",
    '',
    '| kind | cycle p50 | vs floor-2evalsha | handoff p50 | contended-8 acq/s | round trips/acq | semaphore-4 acq/s | verdict |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
  ];
  for (const row of rows) {
    const cycle = m('uncontended', row.contender, 'p50Ms');
    const handoff = m('handoff', row.contender, 'p50Ms');
    const rate = m('contended-8', row.contender, 'acqPerSec');
    const trips = m('contended-8', row.contender, 'roundTripsPerAcq');
    const sem = m('semaphore-4', row.contender, 'acqPerSec');
    const failed = ['uncontended', 'handoff', 'contended-8', 'semaphore-4'].filter(
      (scenario) => results.failed[scenario]?.[row.contender] !== undefined,
    );
    const peers = row.peers.filter((peer) => m('contended-8', peer, 'acqPerSec') !== undefined);
    const bestPeer = peers
      .map((peer) => ({ peer, rate: m('contended-8', peer, 'acqPerSec') ?? 0 }))
      .sort((a, b) => b.rate - a.rate)[0];
    const peerHandoff = Math.min(
      ...row.peers.map((peer) => m('handoff', peer, 'p50Ms') ?? Number.POSITIVE_INFINITY),
    );
    let verdict: string;
    if (failed.length > 0) verdict = `**FAILED** in ${failed.join(', ')}`;
    else if (bestPeer === undefined)
      verdict = `no peer; cycle ${x(ratio(cycle, floor))} the floor, hand-off ${fmt(handoff)} ms`;
    else
      verdict = `${x(ratio(rate, bestPeer.rate))} the acquisitions/s of ${bestPeer.peer}${
        Number.isFinite(peerHandoff)
          ? `, hand-off ${x(ratio(peerHandoff, handoff))} faster than the fastest peer's`
          : ''
      }`;
    lines.push(
      `| ${row.kind} (\`${row.contender}\`) | ${fmt(cycle)} ms | ${x(ratio(cycle, floor))} | ${fmt(handoff)} ms | ${fmt(rate)} | ${fmt(trips)} | ${fmt(sem)} | ${verdict} |`,
    );
  }
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

export function renderMarkdown(results: Results): string {
  const { env } = results;
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
        `| ${v.target} | ${v.status === 'pass' ? 'pass' : v.status === 'miss' ? '**miss**' : 'n/a'} | ${v.detail} |`,
    ),
    '',
    ...kindsTable(results),
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
  lines.push(
    '## How the numbers are taken',
    '',
    '- The uncontended scenarios run every contender in one worker process, interleaved (see there). For every other scenario each contender runs in its own pool of 4 worker processes (tsx children); contended runs start together on a barrier. Times are `process.hrtime.bigint()` (one monotonic clock for every process); latency percentiles come from HdrHistogram.',
    '- `sesame-redlock` is @sesamecare-oss/redlock (on ioredis, the only client it takes); `redlock` is redlock 4.',
    '- Round trips are counted by a small TCP proxy in front of Redis (requests the clients sent, scripts counted once), in a pass separate from the timing pass; commands and CPU come from INFO deltas of the timing pass.',
    '- Every critical section (acquire resolved to release called) of every process is merged and checked for overlap; overlaps or unhandled rejections fail the run.',
    '- Peers run at their defaults; where the defaults make a peer give up under contention (redlock and sesame-redlock after 10 retries, redis-semaphore after 10 s), the adapter asks again and counts it (`giveUps`).',
    '',
  );
  return `${lines.join('\n')}\n`;
}

// ---- SVG ----------------------------------------------------------------------------------

const COLORS = ['#1f77b4', '#ff7f0e'];

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

interface Panel {
  readonly title: string;
  readonly unit: string;
  readonly log: boolean;
  readonly series: readonly string[];
  readonly rows: readonly { readonly label: string; readonly values: readonly (number | undefined)[] }[];
}

function panel(p: Panel, top: number, width: number): { svg: string; height: number } {
  const left = 150;
  const barHeight = 10;
  const rowHeight = p.series.length * barHeight + 8;
  const plotWidth = width - left - 80;
  const values = p.rows.flatMap((row) => row.values).filter((v): v is number => v !== undefined && v > 0);
  const max = values.length === 0 ? 1 : Math.max(...values);
  const min = values.length === 0 ? 1 : Math.min(...values);
  const lo = p.log ? 10 ** Math.floor(Math.log10(min)) : 0;
  const hi = p.log ? 10 ** Math.ceil(Math.log10(max)) : max * 1.1;
  const scale = (v: number): number =>
    p.log
      ? ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotWidth
      : (v / hi) * plotWidth;
  const parts: string[] = [];
  parts.push(`<text x="10" y="${top + 16}" font-size="14" font-weight="bold">${escape(p.title)}</text>`);
  p.series.forEach((name, i) => {
    parts.push(
      `<rect x="${left + i * 120}" y="${top + 24}" width="10" height="10" fill="${COLORS[i % COLORS.length]}"/>`,
      `<text x="${left + i * 120 + 14}" y="${top + 33}" font-size="11">${escape(name)}</text>`,
    );
  });
  let y = top + 44;
  for (const row of p.rows) {
    parts.push(
      `<text x="${left - 6}" y="${y + rowHeight / 2}" font-size="11" text-anchor="end">${escape(row.label)}</text>`,
    );
    row.values.forEach((value, i) => {
      const by = y + i * barHeight;
      if (value === undefined || value <= 0) {
        parts.push(`<text x="${left + 4}" y="${by + 9}" font-size="9" fill="#888">n/a</text>`);
        return;
      }
      const w = Math.max(1, scale(value));
      parts.push(
        `<rect x="${left}" y="${by}" width="${w.toFixed(1)}" height="${barHeight - 1}" fill="${COLORS[i % COLORS.length]}"/>`,
        `<text x="${(left + w + 4).toFixed(1)}" y="${by + 9}" font-size="9">${fmt(value)}${p.unit}</text>`,
      );
    });
    y += rowHeight;
  }
  const axisY = y + 4;
  parts.push(`<line x1="${left}" y1="${axisY}" x2="${left + plotWidth}" y2="${axisY}" stroke="#444"/>`);
  const ticks = p.log
    ? Array.from({ length: Math.round(Math.log10(hi / lo)) + 1 }, (_, i) => lo * 10 ** i)
    : [0, hi / 4, hi / 2, (3 * hi) / 4, hi];
  for (const tick of ticks) {
    const tx = left + (p.log ? scale(tick) : (tick / hi) * plotWidth);
    parts.push(
      `<line x1="${tx.toFixed(1)}" y1="${axisY}" x2="${tx.toFixed(1)}" y2="${axisY + 4}" stroke="#444"/>`,
      `<text x="${tx.toFixed(1)}" y="${axisY + 15}" font-size="9" text-anchor="middle">${fmt(tick)}</text>`,
    );
  }
  parts.push(
    `<text x="${left + plotWidth / 2}" y="${axisY + 28}" font-size="10" text-anchor="middle">${escape(p.unit.trim() === '' ? 'per acquisition' : `${p.unit.trim()}${p.log ? ' (log scale)' : ''}`)}</text>`,
  );
  return { svg: parts.join('\n'), height: axisY + 40 - top };
}

export function renderSvg(results: Results): string {
  const width = 760;
  const contenders = ['latchkey', ...PEERS];
  const handoffRows = contenders.map((label) => ({
    label,
    values: [metric(results, 'handoff', label, 'p50Ms'), metric(results, 'handoff', label, 'p99Ms')],
  }));
  const costRows = contenders.map((label) => ({
    label,
    values: [
      metric(results, 'contended-8', label, 'roundTripsPerAcq'),
      metric(results, 'contended-8', label, 'cmdsPerAcq'),
    ],
  }));
  const first = panel(
    {
      title: 'Handoff latency (release to waiter acquired)',
      unit: ' ms',
      log: true,
      series: ['p50', 'p99'],
      rows: handoffRows,
    },
    10,
    width,
  );
  const second = panel(
    {
      title: 'Per acquisition, 8 contenders on one key',
      unit: '',
      log: false,
      series: ['round trips (client requests)', 'Redis commands (incl. in scripts)'],
      rows: costRows,
    },
    20 + first.height,
    width,
  );
  const height = 30 + first.height + second.height;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    first.svg,
    second.svg,
    `<text x="${width - 10}" y="${height - 6}" font-size="9" text-anchor="end" fill="#666">${escape(`${results.env.quick ? 'quick run' : 'full run'}, ${results.env.date}`)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}

// ---- scaling ------------------------------------------------------------------------------

interface CurveMetric {
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

interface Curve {
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

const CURVES: readonly Curve[] = [
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

const SCALING_DESCRIPTION = [
  "`scaling-contenders-<n>`: the contended run (see contended-8) at n contenders over 4 processes on one key, 1 ms hold; waitP50Ms/waitP99Ms: acquire called to resolved, every acquisition of the timing pass; clientHeapKB: heap used by the 4 worker processes after GC, halfway through the round-trip pass (the whole heap: tsx, the client library and its connections included; what one more waiter adds is below the GC's noise, so the curve shows whether it grows); subscriptions: server pubsub_channels at that moment, less between the passes.",
  "`scaling-keys-<n>`: one session (process 1) holds n keys, a second (process 2) waits on each; once the server subscriptions stop moving, the holder releases every key, 200 releases in flight at a time, and each waiter takes its key. acqPerSec: hand-offs over the time from the first release called to the last waiter acquired; wait: release() called to that waiter acquired; round trips (a second pass through the counting proxy), commands and Redis CPU (INFO deltas, less what an INFO call costs) over the release phase, per hand-off; clientHeapBytesPerKey: heap of both processes after GC with everything held and waiting, less before, per key (before and after each the lowest of three samples 0.5 s apart, in the last round); subscriptions: pubsub_channels while they wait. Below 200 keys (40 in a quick run) the round is repeated for percentiles. Every contender at its defaults. Per-hand-off CPU includes the server's system calls and wake-ups per request, which requests arriving together (200 releases in flight) share and a lone hand-off pays alone.",
];

/** "1 key", "1,000 keys". */
function points(n: number, curve: Curve): string {
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
function flatness(results: Results, curve: Curve, contender: string): string | undefined {
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

function curveContenders(results: Results, curve: Curve): string[] {
  const names = new Set<string>();
  for (const n of curve.points) {
    const scenario = curve.scenario(n);
    for (const table of [results.scenarios, results.failed, results.skipped])
      for (const name of Object.keys(table[scenario] ?? {})) names.add(name);
  }
  return [...names];
}

/** The Markdown section of the scaling curves: a table per curve, the verdicts, the charts. */
export function scalingMarkdown(results: Results): string[] {
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

const LINE_COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728'];

/** The next of 1, 2, 2.5, 5 (times a power of ten) at or above `value`: round axis ends. */
function niceCeil(value: number): number {
  if (!(value > 0)) return 1;
  const decade = 10 ** Math.floor(Math.log10(value));
  const step = [1, 2, 2.5, 5, 10].find((m) => m * decade >= value) ?? 10;
  return step * decade;
}

/** A small chart: x on a log scale over the curve's points, one line per contender. */
function smallMultiple(
  results: Results,
  curve: Curve,
  metric: CurveMetric,
  contenders: readonly string[],
  left: number,
  top: number,
): string {
  const width = 340;
  const height = 150;
  const plot = { x: left + 50, y: top + 28, w: width - 70, h: height - 62 };
  const series = contenders.map((contender) =>
    curve.points
      .map((n) => [n, results.scenarios[curve.scenario(n)]?.[contender]?.[metric.key]] as const)
      .filter((entry): entry is readonly [number, number] => entry[1] !== undefined && entry[1] >= 0),
  );
  const values = series.flat().map(([, v]) => v);
  const positive = values.filter((v) => v > 0);
  // Log scale for y when the values span more than two decades; linear from 0 otherwise.
  const log = positive.length > 0 && Math.max(...positive) / Math.min(...positive) > 100;
  const yLo = log ? 10 ** Math.floor(Math.log10(Math.min(...positive))) : 0;
  const yHi = log
    ? 10 ** Math.ceil(Math.log10(Math.max(...positive)))
    : values.length === 0
      ? 1
      : niceCeil(Math.max(...values) * 1.1);
  const xLo = Math.log10(curve.points[0] ?? 1);
  const xHi = Math.log10(curve.points[curve.points.length - 1] ?? 10);
  const px = (n: number): number => plot.x + ((Math.log10(n) - xLo) / (xHi - xLo || 1)) * plot.w;
  const py = (v: number): number =>
    plot.y +
    plot.h -
    (log
      ? ((Math.log10(Math.max(v, yLo)) - Math.log10(yLo)) / (Math.log10(yHi) - Math.log10(yLo))) * plot.h
      : (v / yHi) * plot.h);
  const parts = [
    `<text x="${left + 10}" y="${top + 14}" font-size="12" font-weight="bold">${escape(metric.label)}${log ? ' (log)' : ''}</text>`,
    `<rect x="${plot.x}" y="${plot.y}" width="${plot.w}" height="${plot.h}" fill="none" stroke="#ccc"/>`,
  ];
  const yTicks = log
    ? Array.from({ length: Math.round(Math.log10(yHi / yLo)) + 1 }, (_, i) => yLo * 10 ** i)
    : [0, yHi / 4, yHi / 2, (3 * yHi) / 4, yHi];
  for (const tick of yTicks) {
    const ty = py(tick).toFixed(1);
    parts.push(
      `<line x1="${plot.x}" y1="${ty}" x2="${plot.x + plot.w}" y2="${ty}" stroke="#eee"/>`,
      `<text x="${plot.x - 4}" y="${ty}" font-size="9" text-anchor="end" dominant-baseline="middle">${tick >= 10 ? Math.round(tick) : Number(tick.toPrecision(3))}</text>`,
    );
  }
  for (const n of curve.points) {
    parts.push(
      `<text x="${px(n).toFixed(1)}" y="${plot.y + plot.h + 12}" font-size="9" text-anchor="middle">${n.toLocaleString('en-US')}</text>`,
    );
  }
  parts.push(
    `<text x="${plot.x + plot.w / 2}" y="${plot.y + plot.h + 25}" font-size="9" text-anchor="middle" fill="#555">${escape(curve.x)} (log scale)</text>`,
  );
  series.forEach((points, i) => {
    const color = LINE_COLORS[i % LINE_COLORS.length] ?? '#000';
    if (points.length > 1)
      parts.push(
        `<polyline fill="none" stroke="${color}" stroke-width="2" points="${points.map(([n, v]) => `${px(n).toFixed(1)},${py(v).toFixed(1)}`).join(' ')}"/>`,
      );
    for (const [n, v] of points)
      parts.push(
        `<circle cx="${px(n).toFixed(1)}" cy="${py(v).toFixed(1)}" r="3" fill="${color}"><title>${escape(`${contenders[i] ?? ''}: ${fmt(v)} at ${n}`)}</title></circle>`,
      );
  });
  if (values.length === 0)
    parts.push(
      `<text x="${plot.x + plot.w / 2}" y="${plot.y + plot.h / 2}" font-size="10" fill="#888" text-anchor="middle">not measured</text>`,
    );
  return parts.join('\n');
}

/** The chart of one scaling curve (small multiples, a panel per metric), or undefined if unmeasured. */
export function renderScalingSvg(results: Results, id: Curve['id']): string | undefined {
  const curve = CURVES.find((c) => c.id === id);
  if (curve === undefined) return undefined;
  const contenders = curveContenders(results, curve).filter((contender) =>
    curve.points.some((n) => results.scenarios[curve.scenario(n)]?.[contender] !== undefined),
  );
  if (contenders.length === 0) return undefined;
  const columns = 2;
  const width = 700;
  const rows = Math.ceil(curve.metrics.length / columns);
  const header = 50;
  const height = header + rows * 150 + 20;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">${escape(`Scaling: ${curve.title}`)}</text>`,
  ];
  contenders.forEach((contender, i) => {
    parts.push(
      `<rect x="${10 + i * 150}" y="31" width="18" height="4" fill="${LINE_COLORS[i % LINE_COLORS.length] ?? '#000'}"/>`,
      `<text x="${32 + i * 150}" y="37" font-size="11">${escape(contender)}</text>`,
    );
  });
  curve.metrics.forEach((metric, i) => {
    const left = (i % columns) * (width / columns);
    const top = header + Math.floor(i / columns) * 150;
    parts.push(smallMultiple(results, curve, metric, contenders, left, top));
  });
  parts.push(
    `<text x="${width - 10}" y="${height - 6}" font-size="9" text-anchor="end" fill="#666">${escape(`${results.env.quick ? 'quick run' : 'full run'}, ${results.env.date}`)}</text>`,
    '</svg>',
    '',
  );
  return parts.join('\n');
}
