// The many-keys scenario's heap of a semaphore waiter and of a latch waiter, beside the lock
// waiter's: for latchkey (a session with `waiterKinds`), after the locks are given back, the
// holder session takes that many keys of one kind (a semaphore's only permit, a latch of count
// 1) and the waiter session waits on each; the waiters' share of the heap is measured as the
// lock waiters' is (after GC, the lowest of a few samples, less the heap once every key is held).
import type { Held, KindWaits, WaiterKind } from '../contenders/types.js';
import type { WorkerHandle } from '../ipc.js';
import { round } from '../stats.js';
import { heapAfterGc, inBatches, lowestHeapAfterGc, session, sleep } from '../worker-state.js';
import { num, str, type OpArgs, type WorkerOps } from './common.js';

export const WAITER_KINDS: readonly WaiterKind[] = ['semaphore', 'latch'];

/** Heap samples after the waits are made (the lowest is kept), and the time between them. */
const HEAP_SAMPLES = 3;
const HEAP_SAMPLE_EVERY_MS = 500;

let heapBefore = 0;
let heapHeld = 0;
let holds: Held[] = [];
let waits: Promise<unknown>[] = [];

function isHeld(value: unknown): value is Held {
  return typeof value === 'object' && value !== null && typeof (value as Held).release === 'function';
}

function kindOf(args: OpArgs): WaiterKind {
  const kind = str(args, 'kind');
  const known = WAITER_KINDS.find((one) => one === kind);
  if (known === undefined) throw new Error(`unknown waiter kind ${kind}`);
  return known;
}

/** The session's way to hold and wait on `kind`, or undefined when its library has none here. */
function waitsOf(args: OpArgs): KindWaits | undefined {
  return session(str(args, 'session')).waiterKinds?.[kindOf(args)];
}

export const manyKeysKindOps: WorkerOps = {
  /** Holds `count` keys of `kind`; false (nothing done) when the session cannot. */
  async 'manyKeysKind.hold'(args) {
    const kind = waitsOf(args);
    if (kind === undefined) return false;
    const prefix = str(args, 'prefix');
    heapBefore = heapAfterGc();
    holds = await inBatches(num(args, 'count'), 200, (i) => kind.hold(`${prefix}:${i}`));
    heapHeld = heapAfterGc();
    return true;
  },
  async 'manyKeysKind.wait'(args) {
    const kind = waitsOf(args);
    if (kind === undefined) throw new Error('the session has no waiter kinds');
    const prefix = str(args, 'prefix');
    const count = num(args, 'count');
    waits = [];
    for (let i = 0; i < count; i += 1) {
      waits.push(kind.wait(`${prefix}:${i}`).catch(() => undefined));
      if (i % 500 === 499) await sleep(1);
    }
    return null;
  },
  /** [the holds' share, holds and waits together]: heap after GC above the start, in bytes. */
  async 'manyKeysKind.heap'() {
    const heap = await lowestHeapAfterGc(HEAP_SAMPLES, HEAP_SAMPLE_EVERY_MS);
    return [heapHeld - heapBefore, heap - heapBefore];
  },
  /** Gives every hold back, lets each waiter through (within `waitMs`), gives theirs back too. */
  async 'manyKeysKind.release'(args) {
    const release = (held: unknown): Promise<unknown> =>
      isHeld(held) ? held.release().catch(() => undefined) : Promise.resolve();
    await inBatches(holds.length, 200, (i) => release(holds[i]));
    const settled = Promise.all(waits);
    const done = await Promise.race([settled, sleep(num(args, 'waitMs')).then(() => undefined)]);
    if (done !== undefined) await inBatches(done.length, 200, (i) => release(done[i]));
    holds = [];
    waits = [];
    return null;
  },
};

/**
 * `<kind>WaiterHeapBytesPerKey` for each kind the holder's and waiter's sessions in `worker`
 * have (none for a contender without `waiterKinds`); `settled` waits until the server's
 * subscriptions stop moving. A kind whose pass fails is left out with a note saying why: the
 * lock's figures measured before it stand.
 */
export async function kindWaiterHeaps(
  worker: WorkerHandle,
  sessions: { readonly holder: string; readonly waiter: string },
  prefix: string,
  count: number,
  settled: () => Promise<unknown>,
): Promise<{ readonly metrics: Record<string, number>; readonly notes: string[] }> {
  const metrics: Record<string, number> = {};
  const notes: string[] = [];
  for (const kind of WAITER_KINDS) {
    const keys = `${prefix}:${kind}`;
    try {
      const held = await worker.call<boolean>({
        op: 'manyKeysKind.hold',
        session: sessions.holder,
        kind,
        prefix: keys,
        count,
      });
      if (!held) continue;
      await worker.call({ op: 'manyKeysKind.wait', session: sessions.waiter, kind, prefix: keys, count });
      await settled();
      const [holdHeap, heap] = await worker.call<[number, number]>({ op: 'manyKeysKind.heap' });
      metrics[`${kind}WaiterHeapBytesPerKey`] = round((heap - holdHeap) / count, 0);
    } catch (error) {
      const reason = error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
      notes.push(`${kind}WaiterHeapBytesPerKey: not measured, the pass failed: ${reason}`);
    } finally {
      await worker.call({ op: 'manyKeysKind.release', waitMs: 60_000 }, 300_000).catch(() => undefined);
    }
  }
  return { metrics, notes };
}
