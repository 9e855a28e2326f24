/**
 * The retry policy of script calls, without Redis: after a first try failed, a call is tried
 * again only after a transient failure, while the caller wants it, never once the client is
 * closed and never past its deadline; a plain read gets two more tries at most.
 */
import { describe, expect, it } from 'vitest';
import { readRetried, retryAfter } from '../../src/engine/retry.js';

/** A failure of the connection: transient. */
const lost = (): Error => new Error('Socket closed unexpectedly');
/** A refusal by the server (named as node-redis names its reply errors): never retried. */
class ErrorReply extends Error {}
const REFUSED = new ErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value');

/** A try that fails `failures` times with `failure()`, then resolves `done`. */
function flaky(
  failures: number,
  failure: () => unknown = lost,
): { tries: number[]; tryAgain: () => Promise<string> } {
  const tries: number[] = [];
  return {
    tries,
    tryAgain: () => {
      tries.push(performance.now());
      return tries.length <= failures ? Promise.reject(failure()) : Promise.resolve('done');
    },
  };
}

const open = { isClosed: () => false, until: Number.POSITIVE_INFINITY };

describe('retryAfter', () => {
  it('tries again after a transient failure, asking the caller before each try', async () => {
    const asked: number[] = [];
    const { tries, tryAgain } = flaky(2);
    const keepTrying = (attempt: number): boolean => {
      asked.push(attempt);
      return true;
    };
    await expect(retryAfter(lost(), tryAgain, { ...open, keepTrying })).resolves.toBe('done');
    expect(tries).toHaveLength(3);
    expect(asked).toEqual([1, 2, 3]);
  });

  it('rejects at once with a failure that is not transient, and with a later one', async () => {
    const first = flaky(0);
    await expect(retryAfter(REFUSED, first.tryAgain, { ...open, keepTrying: () => true })).rejects.toBe(
      REFUSED,
    );
    expect(first.tries).toHaveLength(0);

    const later = flaky(1, () => REFUSED);
    await expect(retryAfter(lost(), later.tryAgain, { ...open, keepTrying: () => true })).rejects.toBe(
      REFUSED,
    );
    expect(later.tries).toHaveLength(1);
  });

  it('stops when the caller says so, and once the client is closed', async () => {
    const limited = flaky(10);
    await expect(
      retryAfter(lost(), limited.tryAgain, { ...open, keepTrying: (attempt) => attempt < 3 }),
    ).rejects.toThrow('Socket closed');
    expect(limited.tries).toHaveLength(2);

    let closed = false;
    const closing = flaky(10, () => {
      closed = true;
      return lost();
    });
    await expect(
      retryAfter(lost(), closing.tryAgain, {
        isClosed: () => closed,
        until: Infinity,
        keepTrying: () => true,
      }),
    ).rejects.toThrow('Socket closed');
    expect(closing.tries).toHaveLength(1);
  });

  it('starts no try past its deadline', async () => {
    const startedAt = performance.now();
    const until = startedAt + 150;
    const always = flaky(1_000);
    await expect(
      retryAfter(lost(), always.tryAgain, { ...open, until, keepTrying: () => true }),
    ).rejects.toThrow('Socket closed');
    expect(always.tries.length).toBeGreaterThan(1);
    // The last backoff is cut to end at the deadline; a timer may fire late on a busy machine.
    for (const at of always.tries) expect(at).toBeLessThan(until + 100);
    // Not at once, nor in a busy loop: the tries are spaced by the backoff, from 20 ms.
    expect(always.tries.length).toBeLessThan(10);
  });
});

describe('readRetried', () => {
  it('sends a read once more twice at most after transient failures, and never after another', async () => {
    const always = flaky(10);
    await expect(readRetried(always.tryAgain, () => false)).rejects.toThrow('Socket closed');
    expect(always.tries).toHaveLength(3);

    const refused = flaky(10, () => REFUSED);
    await expect(readRetried(refused.tryAgain, () => false)).rejects.toBe(REFUSED);
    expect(refused.tries).toHaveLength(1);
  });
});
