// Operation chains, with no Redis: operations of one chain run one at a time in the order they
// were given, whatever each takes; other chains do not wait for them; a failure does not stop the
// next; an idle chain starts its operation at once and is forgotten once its work is done.
import { describe, expect, it } from 'vitest';
import { chainId, OperationChains } from '../../../src/engine/chains.js';

/** A promise settled from outside, for an operation that ends when the test says so. */
function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void; fail: (error: Error) => void } {
  let open!: (value: T) => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<T>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

/** Lets every callback already due run. */
async function flush(): Promise<void> {
  for (let i = 0; i < 10; i += 1) await Promise.resolve();
}

describe('OperationChains', () => {
  it('starts an operation on an idle chain before run() returns', () => {
    const chains = new OperationChains();
    let started = false;
    void chains.run('orders', () => {
      started = true;
      return Promise.resolve();
    });
    expect(started).toBe(true);
  });

  it('runs the operations of one chain one at a time, in the order given', async () => {
    const chains = new OperationChains();
    const log: string[] = [];
    const first = gate();
    const one = chains.run('orders', async () => {
      log.push('first started');
      await first.promise;
      log.push('first ended');
      return 1;
    });
    const two = chains.run('orders', () => {
      log.push('second started');
      return Promise.resolve(2);
    });
    const three = chains.run('orders', () => {
      log.push('third started');
      return Promise.resolve(3);
    });
    await flush();
    expect(log).toEqual(['first started']);
    expect(chains.idle('orders')).toBe(false);
    first.open();
    await expect(Promise.all([one, two, three])).resolves.toEqual([1, 2, 3]);
    expect(log).toEqual(['first started', 'first ended', 'second started', 'third started']);
  });

  it('does not hold up another chain', async () => {
    const chains = new OperationChains();
    const blocked = gate();
    void chains.run('orders', () => blocked.promise);
    let invoiced = false;
    await chains.run('invoices', () => {
      invoiced = true;
      return Promise.resolve();
    });
    expect(invoiced).toBe(true);
    expect(chains.idle('orders')).toBe(false);
    expect(chains.idle('invoices')).toBe(true);
    blocked.open();
  });

  it('goes on after an operation that failed, and hands that failure to its caller only', async () => {
    const chains = new OperationChains();
    const failing = gate();
    const failed = chains.run('orders', () => failing.promise);
    const next = chains.run('orders', () => Promise.resolve('shipped'));
    failing.fail(new Error('Redis went away'));
    await expect(failed).rejects.toThrow('Redis went away');
    await expect(next).resolves.toBe('shipped');
  });

  it('is idle, and forgotten, once the last operation of a chain settled', async () => {
    const chains = new OperationChains();
    expect(chains.idle('orders')).toBe(true);
    const first = gate();
    const one = chains.run('orders', () => first.promise);
    const two = chains.run('orders', () => Promise.reject(new Error('refused')));
    expect(chains.size).toBe(1);
    first.open();
    await one;
    await expect(two).rejects.toThrow('refused');
    await flush();
    expect(chains.idle('orders')).toBe(true);
    expect(chains.size).toBe(0);
  });

  it('hands back an early result while the chain stays busy with the work it keeps', async () => {
    const chains = new OperationChains();
    const cleanUp = gate();
    const result = await chains.runKeepingBusy('orders', (keepBusy) => {
      keepBusy(cleanUp.promise);
      return Promise.resolve('granted');
    });
    expect(result).toBe('granted');
    await flush();
    expect(chains.idle('orders')).toBe(false);
    let nextStarted = false;
    const next = chains.run('orders', () => {
      nextStarted = true;
      return Promise.resolve();
    });
    await flush();
    expect(nextStarted).toBe(false);
    // A failed clean-up frees the chain all the same.
    cleanUp.fail(new Error('clean-up failed'));
    await next;
    expect(nextStarted).toBe(true);
    await flush();
    expect(chains.idle('orders')).toBe(true);
  });

  it('runs a keeping-busy operation after the earlier ones of its chain', async () => {
    const chains = new OperationChains();
    const first = gate();
    const log: string[] = [];
    void chains.run('orders', async () => {
      await first.promise;
      log.push('first');
    });
    const kept = chains.runKeepingBusy('orders', () => {
      log.push('keeping busy');
      return Promise.resolve();
    });
    await flush();
    expect(log).toEqual([]);
    first.open();
    await kept;
    expect(log).toEqual(['first', 'keeping busy']);
  });

  it('names a chain by key and owner field, distinct for distinct pairs', () => {
    expect(chainId('orders', 'client:1')).toBe(chainId('orders', 'client:1'));
    expect(chainId('orders', 'client:1')).not.toBe(chainId('orders', 'client:2'));
    // A key that ends like another's field does not make the two pairs one chain.
    expect(chainId('a:b', 'c')).not.toBe(chainId('a', 'b:c'));
  });
});
