// The shared timer behind every wait's bound: fires each live bound once, in order, never before
// its time by the monotonic clock; a cancelled bound never fires.
import { afterEach, describe, expect, it } from 'vitest';
import { WaitTimers, type TimedOut } from '../../src/engine/wait/wait-timers.js';

function recorder(fired: { name: string; at: number }[], name: string): TimedOut {
  return { timedOut: () => fired.push({ name, at: performance.now() }) };
}

function until(check: () => boolean, ms: number): Promise<void> {
  const end = performance.now() + ms;
  return new Promise((resolve, reject) => {
    const poll = (): void => {
      if (check()) resolve();
      else if (performance.now() > end) reject(new Error('condition not met in time'));
      else setTimeout(poll, 2);
    };
    poll();
  });
}

describe('WaitTimers', () => {
  const timers = new WaitTimers();
  afterEach(() => timers.clear());

  it('fires each bound once, in the order of their times, none early', async () => {
    const fired: { name: string; at: number }[] = [];
    const start = performance.now();
    timers.add(recorder(fired, 'c'), 60);
    timers.add(recorder(fired, 'a'), 10);
    timers.add(recorder(fired, 'b'), 30);
    timers.add(recorder(fired, 'now'), 0);
    expect(timers.size).toBe(4);
    await until(() => fired.length === 4, 2_000);
    expect(fired.map((entry) => entry.name)).toEqual(['now', 'a', 'b', 'c']);
    const due: Record<string, number> = { now: 0, a: 10, b: 30, c: 60 };
    for (const entry of fired) expect(entry.at - start).toBeGreaterThanOrEqual(due[entry.name] ?? 0);
    expect(timers.size).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(fired).toHaveLength(4);
  });

  it('never fires a cancelled bound, and fires the rest', async () => {
    const fired: { name: string; at: number }[] = [];
    const early = timers.add(recorder(fired, 'early'), 5);
    timers.add(recorder(fired, 'late'), 25);
    timers.cancel(early);
    timers.cancel(early);
    expect(timers.size).toBe(1);
    await until(() => fired.length === 1, 2_000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(fired.map((entry) => entry.name)).toEqual(['late']);
  });

  it('keeps the live bounds when many cancelled ones are dropped from the heap', async () => {
    const fired: { name: string; at: number }[] = [];
    const keep = new Set<string>();
    for (let i = 0; i < 5_000; i += 1) {
      const entry = timers.add(recorder(fired, String(i)), 20 + (i % 50));
      if (i % 100 === 0) keep.add(String(i));
      else timers.cancel(entry);
    }
    expect(timers.size).toBe(keep.size);
    await until(() => fired.length === keep.size, 2_000);
    expect(new Set(fired.map((entry) => entry.name))).toEqual(keep);
  });

  it('fires nothing once cleared', async () => {
    const fired: { name: string; at: number }[] = [];
    timers.add(recorder(fired, 'a'), 5);
    timers.clear();
    expect(timers.size).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(fired).toEqual([]);
  });

  it('never keeps the process alive: while anyone waits, the client itself does', () => {
    const refd = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = refd();
    const entry = timers.add(recorder([], 'a'), 60_000);
    timers.add(recorder([], 'b'), 10);
    expect(refd()).toBe(before);
    timers.cancel(entry);
    expect(refd()).toBe(before);
  });
});
