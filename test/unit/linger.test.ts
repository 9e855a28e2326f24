// The linger sweep of idle channels: a channel no one waits on is dropped once idle for
// `lingerMs`, not before; one waited on again is kept; clear() drops nothing.
import { afterEach, describe, expect, it } from 'vitest';
import { IdleChannels } from '../../src/engine/wait/linger.js';
import type { ChannelOwner, ChannelState } from '../../src/engine/wait/waiter.js';

const LINGER_MS = 40;

function state(name: string): ChannelState {
  return {
    name,
    owner: undefined as unknown as ChannelOwner,
    waiters: [],
    ready: Promise.resolve(),
    generation: 0,
    wakeBy: undefined,
    present: false,
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('IdleChannels', () => {
  const made: IdleChannels[] = [];
  afterEach(() => {
    for (const idle of made.splice(0)) idle.clear();
  });

  function idleChannels(dropped: { name: string; at: number }[]): IdleChannels {
    const idle = new IdleChannels(LINGER_MS, (channel) =>
      dropped.push({ name: channel.name, at: performance.now() }),
    );
    made.push(idle);
    return idle;
  }

  it('drops each idle channel once it has lingered, the longest idle first, none early', async () => {
    const dropped: { name: string; at: number }[] = [];
    const idle = idleChannels(dropped);
    const start = performance.now();
    idle.add(state('orders'));
    await sleep(15);
    idle.add(state('invoices'));
    await sleep(LINGER_MS * 6);
    expect(dropped.map((entry) => entry.name)).toEqual(['orders', 'invoices']);
    expect((dropped[0]?.at ?? 0) - start).toBeGreaterThanOrEqual(LINGER_MS - 1);
    expect((dropped[1]?.at ?? 0) - start).toBeGreaterThanOrEqual(LINGER_MS + 14);
  });

  it('keeps a channel waited on again, and drops nothing after clear()', async () => {
    const dropped: { name: string; at: number }[] = [];
    const idle = idleChannels(dropped);
    const orders = state('orders');
    idle.add(orders);
    idle.add(state('coupons'));
    idle.delete(orders);
    await sleep(LINGER_MS * 6);
    expect(dropped.map((entry) => entry.name)).toEqual(['coupons']);
    idle.add(state('invoices'));
    idle.clear();
    await sleep(LINGER_MS * 6);
    expect(dropped.map((entry) => entry.name)).toEqual(['coupons']);
  });
});
