// One local waiter, driven through the small ChannelOwner interface it defines, with no
// subscriptions and no Redis: a wake-up ends a wait or is kept for the next one, the bound ends
// it with `timeout`, an abort and a close fail it, and the head that leaves promotes the next.
import { afterEach, describe, expect, it } from 'vitest';
import { WaitTimers } from '../../src/engine/wait/wait-timers.js';
import {
  Waiter,
  type ChannelOwner,
  type ChannelState,
  type WakePolicy,
} from '../../src/engine/wait/waiter.js';

class FakeOwner implements ChannelOwner {
  closed = false;
  readonly timers = new WaitTimers();
  readonly left: ChannelState[] = [];
  closedError(): Error {
    return new Error('subscriptions closed');
  }
  released(state: ChannelState): void {
    this.left.push(state);
  }
}

function channel(
  owner: ChannelOwner,
  count: number,
  wakes?: WakePolicy,
): { state: ChannelState; waiters: Waiter[] } {
  const state: ChannelState = {
    name: 'latchkey_unlock:orders',
    owner,
    waiters: [],
    ready: Promise.resolve(),
    generation: 0,
    wakeBy: wakes === undefined ? undefined : { policy: wakes, demands: new Map([[1, count]]) },
    present: false,
  };
  const waiters = Array.from({ length: count }, () => new Waiter(state, 1));
  state.waiters = [...waiters];
  return { state, waiters };
}

describe('Waiter', () => {
  const owners: FakeOwner[] = [];
  function owner(): FakeOwner {
    const made = new FakeOwner();
    owners.push(made);
    return made;
  }
  afterEach(() => {
    for (const made of owners.splice(0)) made.timers.clear();
  });

  it('ends a wait in progress on a wake-up, and keeps one that came first for the next wait', async () => {
    const { waiters } = channel(owner(), 1);
    const [waiter] = waiters as [Waiter];
    const waiting = waiter.wait(5_000, undefined);
    waiter.wake();
    await expect(waiting).resolves.toBe('attempt');
    waiter.wake('promoted');
    // `attempt` outranks `promoted` while pending.
    waiter.wake('attempt');
    await expect(waiter.wait(5_000, undefined)).resolves.toBe('attempt');
    expect(
      waiter.waitFor(5_000, undefined, { woken: () => undefined, failed: () => undefined }),
    ).toBeUndefined();
  });

  it('ends with `timeout` once its bound has passed, not before', async () => {
    const { waiters } = channel(owner(), 1);
    const [waiter] = waiters as [Waiter];
    const start = performance.now();
    await expect(waiter.wait(30, undefined)).resolves.toBe('timeout');
    expect(performance.now() - start).toBeGreaterThanOrEqual(29);
  });

  it("fails with the signal's reason on abort, and with the owner's error once it is closed", async () => {
    const fake = owner();
    const { waiters } = channel(fake, 1);
    const [waiter] = waiters as [Waiter];
    const controller = new AbortController();
    const waiting = waiter.wait(5_000, controller.signal);
    const reason = new Error('order cancelled');
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    fake.closed = true;
    await expect(waiter.wait(5_000, undefined)).rejects.toThrow('subscriptions closed');
  });

  it('wakes the next waiter when the head leaves: to try if it left without the lock, else promoted', async () => {
    const fake = owner();
    const { state, waiters } = channel(fake, 3);
    const [head, second, third] = waiters as [Waiter, Waiter, Waiter];
    expect(head.isHead).toBe(true);
    const secondWait = second.wait(5_000, undefined);
    head.leave(false);
    await expect(secondWait).resolves.toBe('attempt');
    expect(second.isHead).toBe(true);
    const thirdWait = third.wait(5_000, undefined);
    second.leave(true);
    await expect(thirdWait).resolves.toBe('promoted');
    expect(fake.left).toEqual([state, state]);
    // Leaving twice changes nothing.
    second.leave(true);
    expect(fake.left).toHaveLength(2);
    expect(state.waiters).toEqual([third]);
  });

  it('passes a wake-up it did not use on to the first waiter asleep, on a channel with a wake policy', async () => {
    const fake = owner();
    const { waiters } = channel(fake, 4, () => Number.POSITIVE_INFINITY);
    const [head, woken, asleep, last] = waiters as [Waiter, Waiter, Waiter, Waiter];
    // The head is awake (trying): not asleep. The second is woken and leaves without trying.
    const wokenWait = woken.wait(5_000, undefined);
    const asleepWait = asleep.wait(5_000, undefined);
    let lastWoke = false;
    void last.wait(5_000, undefined).then(() => {
      lastWoke = true;
    });
    expect(head.sleeping).toBe(false);
    expect(asleep.sleeping).toBe(true);
    woken.wake();
    await expect(wokenWait).resolves.toBe('attempt');
    woken.leave(false);
    await expect(asleepWait).resolves.toBe('attempt');
    await Promise.resolve();
    expect(lastWoke).toBe(false);

    // A wake-up that was used (the waiter tried and went back to sleep) is not passed on.
    void asleep.wait(5_000, undefined);
    asleep.leave(false);
    await Promise.resolve();
    expect(lastWoke).toBe(false);
  });

  it('passes the wake-up of a head that leaves unserved to the first waiter asleep, past one trying', async () => {
    const fake = owner();
    const { waiters } = channel(fake, 3, () => Number.POSITIVE_INFINITY);
    const [head, trying, asleep] = waiters as [Waiter, Waiter, Waiter];
    const headWait = head.wait(5_000, undefined);
    const asleepWait = asleep.wait(5_000, undefined);
    head.wake();
    await expect(headWait).resolves.toBe('attempt');
    // The second waiter's attempt is in flight (it waits for nothing): the head gives up.
    expect(trying.sleeping).toBe(false);
    head.leave(false);
    await expect(asleepWait).resolves.toBe('attempt');
  });

  it('passes nothing on when the waiter that leaves was never woken, or took what it waited for', async () => {
    const fake = owner();
    const { waiters } = channel(fake, 3, () => Number.POSITIVE_INFINITY);
    const [, second, third] = waiters as [Waiter, Waiter, Waiter];
    let thirdWoke = false;
    void third.wait(5_000, undefined).then(() => {
      thirdWoke = true;
    });
    second.leave(false);
    const taken = channel(fake, 3, () => Number.POSITIVE_INFINITY);
    const [, takenSecond, takenThird] = taken.waiters as [Waiter, Waiter, Waiter];
    let takenThirdWoke = false;
    void takenThird.wait(5_000, undefined).then(() => {
      takenThirdWoke = true;
    });
    takenSecond.wake();
    takenSecond.leave(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(thirdWoke).toBe(false);
    expect(takenThirdWoke).toBe(false);
  });
});
