/** What a bound calls when it runs out. @internal */
export interface TimedOut {
  timedOut(): void;
}

/** One bound in {@link WaitTimers}; `target` is dropped when it is cancelled or has fired. @internal */
export interface WaitTimer {
  readonly at: number;
  target: TimedOut | undefined;
}

/** Below this many entries the heap is never rebuilt to drop cancelled ones. */
const COMPACT_MIN = 1_024;

/**
 * The bounds of every wait of one client, on one Node timer: a waiter costs an entry in a heap
 * instead of a Timeout of its own, and a wake-up cancels its bound by dropping a reference,
 * with no timer call on the hand-over's path. Cancelled entries stay in the heap until their
 * time comes, or until they outnumber the live ones four to one and the heap is rebuilt.
 *
 * A bound never fires early by the monotonic clock. The timer never keeps the process alive:
 * while anyone waits, the client's keep-alive does (see {@link Notifications}).
 * @internal
 */
export class WaitTimers {
  readonly #heap: WaitTimer[] = [];
  #live = 0;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  readonly #fire = (): void => {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const heap = this.#heap;
    const now = performance.now();
    for (let next = heap[0]; next !== undefined && next.at <= now; next = heap[0]) {
      this.#pop();
      const target = next.target;
      if (target === undefined) continue;
      next.target = undefined;
      this.#live -= 1;
      target.timedOut();
    }
    if (this.#live === 0) heap.length = 0;
    const first = heap[0];
    if (first !== undefined) this.#arm(first.at);
  };

  /** Live bounds: those neither cancelled nor fired. */
  get size(): number {
    return this.#live;
  }

  /** Calls `target.timedOut()` once `ms` milliseconds have passed, unless cancelled first. */
  add(target: TimedOut, ms: number): WaitTimer {
    const entry: WaitTimer = { at: performance.now() + Math.max(0, ms), target };
    this.#push(entry);
    this.#live += 1;
    if (entry.at < this.#timerAt) this.#arm(entry.at);
    return entry;
  }

  /** Stops `entry` from firing; nothing if it fired or was cancelled already. */
  cancel(entry: WaitTimer): void {
    if (entry.target === undefined) return;
    entry.target = undefined;
    this.#live -= 1;
    const size = this.#heap.length;
    if (size > COMPACT_MIN && size > 4 * this.#live) this.#compact();
  }

  /** Drops every bound and the timer. */
  clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    for (const entry of this.#heap) entry.target = undefined;
    this.#heap.length = 0;
    this.#live = 0;
  }

  #arm(at: number): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = at;
    // Node's timers run on the event loop's clock, which may lag the monotonic one: a timer that
    // fires a little early finds nothing due and is armed again.
    this.#timer = setTimeout(this.#fire, Math.max(1, Math.ceil(at - performance.now())));
    this.#timer.unref();
  }

  #compact(): void {
    const live = this.#heap.filter((entry) => entry.target !== undefined);
    this.#heap.length = 0;
    for (const entry of live) this.#push(entry);
  }

  #push(entry: WaitTimer): void {
    const heap = this.#heap;
    let index = heap.length;
    heap.push(entry);
    while (index > 0) {
      const parentIndex = (index - 1) >> 1;
      const parent = heap[parentIndex] as WaitTimer;
      if (parent.at <= entry.at) break;
      heap[index] = parent;
      index = parentIndex;
    }
    heap[index] = entry;
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop();
    if (last === undefined || heap.length === 0) return;
    let index = 0;
    const size = heap.length;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= size) break;
      const right = left + 1;
      const leftEntry = heap[left] as WaitTimer;
      const rightEntry = heap[right];
      const child = rightEntry !== undefined && rightEntry.at < leftEntry.at ? right : left;
      const childEntry = heap[child] as WaitTimer;
      if (last.at <= childEntry.at) break;
      heap[index] = childEntry;
      index = child;
    }
    heap[index] = last;
  }
}
