// The targets of many held locks (the manyKeys scenario): the client heap per held lock with a
// waiter, and the renewal of every held lock by the watchdog at under one call per 1,000 locks.
import type { Results } from '../results-model.js';
import { all, fmt, metric, ms, num, verdict, type Verdict } from './common.js';

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

/** The heap and renewal verdicts of latchkey's manyKeys points. */
export function heldLockTargets(results: Results): Verdict[] {
  const verdicts: Verdict[] = [];
  const m = (scenario: string, contender: string, name: string): number | undefined =>
    metric(results, scenario, contender, name);

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
