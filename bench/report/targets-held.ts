// The targets of many held locks (the manyKeys scenario): latchkey's own heap per held lock with a
// waiter, a semaphore's and a latch's waiter against a lock's, and the renewal of every held
// lock by the watchdog at under one call per 1,000 locks.
import type { Results } from '../results-model.js';
import { all, fmt, metric, ms, num, ratio, verdict, x, type Verdict } from './common.js';

/** manyKeys sizes, largest first. */
const MANY_KEYS_SIZES = [100_000, 10_000, 1_000] as const;
/**
 * The minimal pub/sub waiter on node-redis, measured in manyKeys beside latchkey: its heap per
 * lock is what the harness and the client keep with no lock library around them.
 */
const HEAP_FLOOR = 'floor-pubsub';
/** What latchkey itself may keep per held lock with a waiter, above the floor, in bytes. */
const OWN_HEAP_BYTES = 1024;

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

/** A heap figure "C B (holder A B + waiter B B)", or "C B" when it was not split. */
function split(total: number | undefined, holder: number | undefined, waiter: number | undefined): string {
  return holder === undefined || waiter === undefined
    ? `${num(total)} B`
    : `${num(total)} B (holder ${fmt(holder)} B + waiter ${fmt(waiter)} B)`;
}

/**
 * Why the heap figures at a point cannot be judged, or undefined: holds lost there (expired
 * for want of renewal) let waiters take their locks, so the heap is no longer that of held
 * locks with waiters. The renewal target and the point's table show the loss itself.
 */
function unsound(
  size: number,
  at: (contender: string, name: string) => number | undefined,
): string | undefined {
  const lost = at('latchkey', 'holdsLost') ?? 0;
  const gone = at('latchkey', 'sampledKeysGone') ?? 0;
  return lost > 0 || gone > 0
    ? `not judged: manyKeys-${size} lost ${lost} holds (${gone} sampled keys gone), so its heap is not that of held locks with waiters`
    : undefined;
}

/**
 * latchkey's own heap per held lock with a waiter: its figure less the floor's at the same
 * point (the harness and node-redis alone), so what is judged is what latchkey keeps.
 */
function ownHeap(
  size: number | undefined,
  at: (contender: string, name: string) => number | undefined,
): Verdict {
  const target = `latchkey's own heap per held lock with a waiter <= 1 KB (above ${HEAP_FLOOR}: the harness and node-redis)`;
  if (size === undefined)
    return verdict(target, undefined, 'latchkey n/a (no manyKeys point measured the heap)');
  const why = unsound(size, at);
  if (why !== undefined) return verdict(target, undefined, why);
  const heap = at('latchkey', 'heapBytesPerLock');
  const floor = at(HEAP_FLOOR, 'heapBytesPerLock');
  const own = heap === undefined || floor === undefined ? undefined : heap - floor;
  const floorText =
    floor === undefined
      ? `${HEAP_FLOOR} n/a at the same point (not measured in this run)`
      : `${HEAP_FLOOR} ${split(floor, at(HEAP_FLOOR, 'holderHeapBytesPerLock'), at(HEAP_FLOOR, 'waiterHeapBytesPerLock'))}`;
  return verdict(
    target,
    own === undefined ? undefined : own <= OWN_HEAP_BYTES,
    `manyKeys-${size}: latchkey ${split(heap, at('latchkey', 'holderHeapBytesPerLock'), at('latchkey', 'waiterHeapBytesPerLock'))} - ${floorText} = ${num(own)} B of latchkey's own (needs <= ${OWN_HEAP_BYTES} B)`,
    'heap',
  );
}

/** A semaphore waiter and a latch waiter against a lock waiter, at the same manyKeys point. */
function kindWaiters(
  size: number | undefined,
  at: (contender: string, name: string) => number | undefined,
): Verdict {
  const target = 'a semaphore or a latch waiter takes no more heap than a lock waiter';
  const lock = at('latchkey', 'waiterHeapBytesPerLock');
  const kinds = (['semaphore', 'latch'] as const).map((kind) => {
    const bytes = at('latchkey', `${kind}WaiterHeapBytesPerKey`);
    return { kind, bytes, ok: bytes === undefined || lock === undefined ? undefined : bytes <= lock };
  });
  if (size === undefined || lock === undefined)
    return verdict(target, undefined, "latchkey n/a (no manyKeys point measured a lock waiter's heap)");
  const why = unsound(size, at);
  if (why !== undefined) return verdict(target, undefined, why);

  return verdict(
    target,
    all(...kinds.map((one) => one.ok)),
    `manyKeys-${size}: lock waiter ${fmt(lock)} B; ${kinds
      .map(({ kind, bytes }) =>
        bytes === undefined
          ? `${kind} waiter n/a (not measured in this run)`
          : `${kind} waiter ${fmt(bytes)} B = ${x(ratio(bytes, lock))} (needs <= 1.00x)`,
      )
      .join('; ')}`,
    'kinds',
  );
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
  const at = (contender: string, name: string): number | undefined =>
    heapSize === undefined ? undefined : m(`manyKeys-${heapSize}`, contender, name);
  verdicts.push(ownHeap(heapSize, at), kindWaiters(heapSize, at));

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
