// The watchdog's timers, driven by a fake host and vitest's fake clock (no Redis): renewals go
// out every interval, sooner after a failed one, in batches of at most the batch size and never
// mixing slots; a hold nobody renews is expired at its deadline, not before, and a renewed one
// at its new deadline; untracked holds and a stopped watchdog send nothing.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Hold } from '../../../../src/engine/holds/hold.js';
import { Watchdog, type WatchdogHost } from '../../../../src/engine/holds/watchdog.js';
import type { Protocol } from '../../../../src/engine/types.js';

const INTERVAL_MS = 1_000;
const LEASE_MS = 3_000;
/** A hold's deadline comes this much before its lease ends: 1% of the lease, plus 2 ms. */
const MARGIN_MS = LEASE_MS / 100 + 2;

function hold(name: string, watchdog = true, leaseMs = LEASE_MS): Hold {
  const made = new Hold(
    { name, key: name, channel: `unlock:${name}`, protocol: {} as Protocol },
    `field-${name}`,
    leaseMs,
    watchdog,
  );
  made.count = 1;
  made.extend(performance.now());
  return made;
}

/** Renews as the engine's renewal does (extends the lease from the send, and says so), or fails. */
class FakeHost implements WatchdogHost {
  readonly renewals: { at: number; names: string[] }[] = [];
  readonly expired: { at: number; name: string }[] = [];
  /** What the next renewals resolve with. */
  answer = true;
  /** A renewal that is not answered until the test says so. */
  held: Promise<void> | undefined;
  watchdog: Watchdog | undefined;

  async renew(holds: readonly Hold[]): Promise<boolean> {
    const sentAt = performance.now();
    this.renewals.push({ at: sentAt, names: holds.map((each) => each.name) });
    if (this.held !== undefined) await this.held;
    if (!this.answer) return false;
    for (const each of holds) {
      each.extend(sentAt);
      this.watchdog?.touched(each);
    }
    return true;
  }

  expire(expired: Hold): void {
    this.expired.push({ at: performance.now(), name: expired.name });
  }
}

describe('Watchdog', () => {
  let start = 0;
  const watchdogs: Watchdog[] = [];
  function watchdog(host: FakeHost, batchSize = 1_000, groupOf?: (hold: Hold) => number): Watchdog {
    const made = new Watchdog(host, INTERVAL_MS, batchSize, groupOf);
    host.watchdog = made;
    watchdogs.push(made);
    return made;
  }

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    start = performance.now();
  });
  afterEach(() => {
    for (const made of watchdogs.splice(0)) made.stop();
    vi.useRealTimers();
  });

  it('renews a hold every interval, not before, and keeps it from expiring', async () => {
    const host = new FakeHost();
    watchdog(host).track(hold('orders'));
    await vi.advanceTimersByTimeAsync(INTERVAL_MS - 1);
    expect(host.renewals).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    await vi.advanceTimersByTimeAsync(4 * INTERVAL_MS);
    expect(host.renewals.map((renewal) => renewal.at - start)).toEqual([1_000, 2_000, 3_000, 4_000, 5_000]);
    expect(host.renewals.every((renewal) => renewal.names.join() === 'orders')).toBe(true);
    expect(host.expired).toEqual([]);
  });

  it('tries again after the retry delay when a renewal failed, and expires the hold at its deadline', async () => {
    const host = new FakeHost();
    host.answer = false;
    const dog = watchdog(host);
    expect(dog.retryDelayMs).toBe(INTERVAL_MS / 4);
    dog.track(hold('orders'));
    await vi.advanceTimersByTimeAsync(LEASE_MS - MARGIN_MS - 1);
    expect(host.renewals.map((renewal) => renewal.at - start)).toEqual([
      1_000, 1_250, 1_500, 1_750, 2_000, 2_250, 2_500, 2_750,
    ]);
    expect(host.expired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(host.expired).toEqual([{ at: start + LEASE_MS - MARGIN_MS, name: 'orders' }]);
    // An expired hold is renewed no more.
    await vi.advanceTimersByTimeAsync(2 * INTERVAL_MS);
    expect(host.renewals).toHaveLength(8);
  });

  it('bounds the retry delay: never over the interval, never under 50 ms unless the interval is', () => {
    const host = new FakeHost();
    expect(new Watchdog(host, 40, 10).retryDelayMs).toBe(40);
    expect(new Watchdog(host, 100, 10).retryDelayMs).toBe(50);
    expect(new Watchdog(host, 10_000, 10).retryDelayMs).toBe(1_000);
  });

  it('renews in batches of at most the batch size', async () => {
    const host = new FakeHost();
    const dog = watchdog(host, 2);
    for (const name of ['a', 'b', 'c', 'd', 'e']) dog.track(hold(name));
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(host.renewals.map((renewal) => renewal.names)).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
  });

  it('never mixes slots in a batch', async () => {
    const host = new FakeHost();
    const slots: Record<string, number> = { a: 7, b: 9, c: 7, d: 9, e: 7 };
    const dog = watchdog(host, 2, (each) => slots[each.name] ?? -1);
    for (const name of ['a', 'b', 'c', 'd', 'e']) dog.track(hold(name));
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(host.renewals.map((renewal) => renewal.names)).toEqual([['a', 'c'], ['e'], ['b', 'd']]);
  });

  it('renews no hold once untracked, and no call goes out when none is left', async () => {
    const host = new FakeHost();
    const dog = watchdog(host);
    const orders = hold('orders');
    const invoices = hold('invoices');
    dog.track(orders);
    dog.track(invoices);
    dog.untrack(orders);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(host.renewals.map((renewal) => renewal.names)).toEqual([['invoices']]);
    dog.untrack(invoices);
    await vi.advanceTimersByTimeAsync(5 * LEASE_MS);
    expect(host.renewals).toHaveLength(1);
    expect(host.expired).toEqual([]);
  });

  it('never renews a hold with a lease of its own, and expires each at its deadline, the earliest first', async () => {
    const host = new FakeHost();
    const dog = watchdog(host);
    dog.track(hold('long', false, 3_000));
    dog.track(hold('short', false, 1_000));
    await vi.advanceTimersByTimeAsync(1_000 - 12 - 1);
    expect(host.expired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(host.expired).toEqual([{ at: start + 988, name: 'short' }]);
    await vi.advanceTimersByTimeAsync(3_000 - MARGIN_MS - 988);
    expect(host.expired.map((expired) => [expired.at - start, expired.name])).toEqual([
      [988, 'short'],
      [2_968, 'long'],
    ]);
    expect(host.renewals).toEqual([]);
  });

  it('expires a hold whose lease was set again at its new deadline, not the old one', async () => {
    const host = new FakeHost();
    const dog = watchdog(host);
    const orders = hold('orders', false);
    dog.track(orders);
    await vi.advanceTimersByTimeAsync(2_000);
    orders.extend(performance.now());
    dog.touched(orders);
    await vi.advanceTimersByTimeAsync(LEASE_MS - MARGIN_MS - 2_000);
    expect(host.expired).toEqual([]);
    await vi.advanceTimersByTimeAsync(2_000 - 1);
    expect(host.expired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(host.expired).toEqual([{ at: start + 2_000 + LEASE_MS - MARGIN_MS, name: 'orders' }]);
  });

  it('sends no second renewal while one is in flight, and renews the holds tracked meanwhile next time', async () => {
    const host = new FakeHost();
    let answer!: () => void;
    host.held = new Promise((resolve) => (answer = resolve));
    const dog = watchdog(host);
    dog.track(hold('orders'));
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    dog.track(hold('invoices'));
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(host.renewals).toHaveLength(1);
    answer();
    host.held = undefined;
    await vi.advanceTimersByTimeAsync(INTERVAL_MS);
    expect(host.renewals.map((renewal) => [renewal.at - start, renewal.names])).toEqual([
      [1_000, ['orders']],
      [3_000, ['orders', 'invoices']],
    ]);
  });

  it('sends nothing and expires nothing once stopped, and tracks nothing after', async () => {
    const host = new FakeHost();
    const dog = watchdog(host);
    dog.track(hold('orders'));
    dog.track(hold('receipts', false));
    dog.stop();
    dog.track(hold('invoices'));
    await vi.advanceTimersByTimeAsync(5 * LEASE_MS);
    expect(host.renewals).toEqual([]);
    expect(host.expired).toEqual([]);
  });
});
