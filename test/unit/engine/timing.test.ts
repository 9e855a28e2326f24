// The engine's small timing tools, with no Redis: one listener per signal whatever the number of
// watchers, gone with the last of them; work that an abort ends at once; and a bounded wait for
// work that never rejects.
import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  abortable,
  unwatchAbort,
  watchAbort,
  within,
  type AbortWatcher,
} from '../../../src/engine/timing.js';

function watcher(calls: string[], name: string): AbortWatcher {
  return { handleEvent: () => calls.push(name) };
}

describe('watchAbort', () => {
  it('puts one listener on a signal for any number of watchers, and tells each once', () => {
    const controller = new AbortController();
    const calls: string[] = [];
    const watchers = Array.from({ length: 20 }, (_, i) => watcher(calls, `w${i}`));
    for (const each of watchers) watchAbort(controller.signal, each);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    unwatchAbort(controller.signal, watchers[0] as AbortWatcher);
    controller.abort();
    controller.abort();
    expect(calls).toHaveLength(19);
    expect(calls).not.toContain('w0');
  });

  it('takes its listener off the signal with the last watcher', () => {
    const controller = new AbortController();
    const calls: string[] = [];
    const first = watcher(calls, 'first');
    const second = watcher(calls, 'second');
    watchAbort(controller.signal, first);
    watchAbort(controller.signal, second);
    unwatchAbort(controller.signal, first);
    unwatchAbort(controller.signal, first);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    unwatchAbort(controller.signal, second);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    controller.abort();
    expect(calls).toEqual([]);
  });
});

describe('abortable', () => {
  it('settles as the work does, and leaves no listener behind', async () => {
    const controller = new AbortController();
    await expect(abortable(Promise.resolve('done'), controller.signal)).resolves.toBe('done');
    const failure = new Error('refused');
    await expect(abortable(Promise.reject(failure), controller.signal)).rejects.toBe(failure);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it("rejects with the signal's reason at once on abort, and at once for a signal aborted already", async () => {
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    const never = new Promise<never>(() => undefined);
    const pending = abortable(never, controller.signal);
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await expect(abortable(never, AbortSignal.abort(reason))).rejects.toBe(reason);
  });
});

describe('within', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('ends when the work settles, or when the time is up, and never rejects', async () => {
    const start = performance.now();
    const ended: number[] = [];
    void within(new Promise<never>(() => undefined), 100).then(() => ended.push(performance.now() - start));
    void within(Promise.reject(new Error('rollback failed')), 100).then(() =>
      ended.push(performance.now() - start),
    );
    void within(new Promise((resolve) => setTimeout(resolve, 30)), 100).then(() =>
      ended.push(performance.now() - start),
    );
    await vi.advanceTimersByTimeAsync(99);
    expect(ended).toEqual([0, 30]);
    await vi.advanceTimersByTimeAsync(1);
    expect(ended).toEqual([0, 30, 100]);
    await expect(within(new Promise<never>(() => undefined), 0)).resolves.toBeUndefined();
  });
});
