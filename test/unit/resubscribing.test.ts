// Subscribing again after Redis could not be reached: tried after growing pauses until it
// succeeds; given up at once on a failure that is not an outage, when no one waits any more, or
// on close, whose error a try in its pause rejects with at once.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Resubscribing } from '../../src/engine/wait/subscriber.js';

class Outage extends Error {}

function resubscribing(): { retries: Resubscribing; close: () => void } {
  let closed = false;
  const retries = new Resubscribing(
    (error) => !(error instanceof Outage),
    () => (closed ? new Error('closed') : undefined),
  );
  return {
    retries,
    close: () => {
      closed = true;
      retries.clear();
    },
  };
}

/** A subscribe that fails `failures` times with an outage, then succeeds; it counts its tries. */
function flaky(failures: number): { subscribe: () => Promise<void>; tries: () => number } {
  let tries = 0;
  return {
    tries: () => tries,
    subscribe: () => {
      tries += 1;
      return tries <= failures ? Promise.reject(new Outage('ECONNREFUSED')) : Promise.resolve();
    },
  };
}

describe('Resubscribing', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('tries again after pauses that grow, until the subscribe succeeds', async () => {
    vi.useFakeTimers();
    const { retries } = resubscribing();
    const { subscribe, tries } = flaky(3);
    let done = false;
    const running = retries
      .run(subscribe, () => true)
      .then(() => {
        done = true;
      });
    // Pauses of 50, 100 and 200 ms: each try comes when its pause ends, not before.
    for (const [pauseMs, triesAfter] of [
      [50, 2],
      [100, 3],
      [200, 4],
    ] as const) {
      await vi.advanceTimersByTimeAsync(pauseMs - 1);
      expect(tries()).toBe(triesAfter - 1);
      await vi.advanceTimersByTimeAsync(1);
      expect(tries()).toBe(triesAfter);
    }
    await running;
    expect(done).toBe(true);
  });

  it('gives up at once on a failure that is not an outage', async () => {
    const { retries } = resubscribing();
    let tries = 0;
    const refused = new Error('NOPERM this user has no permissions to access the channel');
    await expect(
      retries.run(
        () => {
          tries += 1;
          return Promise.reject(refused);
        },
        () => true,
      ),
    ).rejects.toBe(refused);
    expect(tries).toBe(1);
  });

  it('gives up once no one waits for the subscription', async () => {
    vi.useFakeTimers();
    const { retries } = resubscribing();
    const { subscribe, tries } = flaky(10);
    let wanted = true;
    const running = retries.run(subscribe, () => wanted);
    running.catch(() => undefined);
    await vi.advanceTimersByTimeAsync(50);
    expect(tries()).toBe(2);
    wanted = false;
    await vi.advanceTimersByTimeAsync(100);
    await expect(running).rejects.toBeInstanceOf(Outage);
    expect(tries()).toBe(3);
  });

  it('rejects with the close error as soon as it is closed during a pause', async () => {
    vi.useFakeTimers();
    const { retries, close } = resubscribing();
    const { subscribe, tries } = flaky(10);
    const running = retries.run(subscribe, () => true);
    running.catch(() => undefined);
    await vi.advanceTimersByTimeAsync(150);
    expect(tries()).toBe(3);
    // In its 200 ms pause; no time passes from here on.
    close();
    await expect(running).rejects.toThrow('closed');
    expect(tries()).toBe(3);
    expect(vi.getTimerCount()).toBe(0);
  });
});
