// The shared subscriptions of one client, over a fake subscriber connection (no Redis) on
// vitest's fake clock: one subscription per channel for all its local waiters, a message that
// wakes the head (or as many asleep as the kind's policy says), a channel kept for the linger
// time after its last waiter and dropped after, the grant channel subscribed once, every waiter
// woken after a reconnect, and every wait failed on close.
import { ErrorReply } from 'redis';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ClientClosedError } from '../../../../src/errors.js';
import { Notifications, type SubscriptionsHost } from '../../../../src/engine/wait/channels.js';
import type { Waiter, WakeReason } from '../../../../src/engine/wait/waiter.js';
import type { Subscriber } from '../../../../src/redis/connection.js';

const LINGER_MS = 1_000;
const GRANTS = 'latchkey_grant:abc';

/** A subscriber connection that confirms at once (or fails with `failure`) and delivers on demand. */
class FakeSubscriber implements Subscriber {
  readonly listeners = new Map<string, (message: string, channel: string) => void>();
  readonly subscribed: string[] = [];
  readonly unsubscribed: string[] = [];
  destroyed = 0;
  failure: Error | undefined;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown> {
    this.subscribed.push(channel);
    if (this.failure !== undefined) return Promise.reject(this.failure);
    this.listeners.set(channel, listener);
    return Promise.resolve();
  }
  unsubscribe(channel: string): Promise<unknown> {
    this.unsubscribed.push(channel);
    this.listeners.delete(channel);
    return Promise.resolve();
  }
  unref(): void {}
  ref(): void {}
  destroy(): void {
    this.destroyed += 1;
  }
  publish(channel: string, message: string): void {
    this.listeners.get(channel)?.(message, channel);
  }
}

interface Setup {
  readonly notifications: Notifications;
  readonly subscriber: FakeSubscriber;
  readonly grants: string[];
  connects: number;
}

/** What each waiter's wait ended with, by index; undefined while it still waits. */
function watch(waiters: Waiter[]): (WakeReason | Error | undefined)[] {
  const ended: (WakeReason | Error | undefined)[] = waiters.map(() => undefined);
  waiters.forEach((waiter, index) => {
    waiter.wait(Number.POSITIVE_INFINITY, undefined).then(
      (reason) => (ended[index] = reason),
      (error: unknown) => (ended[index] = error as Error),
    );
  });
  return ended;
}

describe('Notifications', () => {
  const made: Notifications[] = [];
  function setup(): Setup {
    const subscriber = new FakeSubscriber();
    const result: Setup = {
      notifications: undefined as unknown as Notifications,
      subscriber,
      grants: [],
      connects: 0,
    };
    const host: SubscriptionsHost = {
      connect: () => {
        result.connects += 1;
        return Promise.resolve(subscriber);
      },
      grantChannel: GRANTS,
      grantListener: () => (ticket) => result.grants.push(ticket),
      onError: () => undefined,
      closedError: () => new ClientClosedError(),
    };
    const notifications = new Notifications(host, LINGER_MS);
    made.push(notifications);
    return Object.assign(result, { notifications });
  }
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(async () => {
    for (const notifications of made.splice(0)) await notifications.close();
    vi.useRealTimers();
  });

  it('subscribes once per channel on one connection, for every local waiter of it', async () => {
    const client = setup();
    const { notifications, subscriber } = client;
    const first = notifications.join('unlock:orders', false);
    const second = notifications.join('unlock:orders', false);
    const other = notifications.join('unlock:invoices', false);
    expect([first.fresh, second.fresh, other.fresh]).toEqual([true, false, true]);
    await vi.advanceTimersByTimeAsync(0);
    expect(subscriber.subscribed).toEqual(['unlock:orders', 'unlock:invoices']);
    expect(notifications.channelCount).toBe(2);
    expect(client.connects).toBe(1);
  });

  it('wakes only the head with a message, and counts the message', async () => {
    const { notifications, subscriber } = setup();
    const waiters = [1, 2, 3].map(() => notifications.join('unlock:orders', false).waiter);
    await vi.advanceTimersByTimeAsync(0);
    const ended = watch(waiters);
    expect(notifications.generationOf('unlock:orders')).toBe(0);
    subscriber.publish('unlock:orders', '0');
    await vi.advanceTimersByTimeAsync(0);
    expect(ended).toEqual(['attempt', undefined, undefined]);
    expect(notifications.generationOf('unlock:orders')).toBe(1);
  });

  it("wakes as many waiters asleep as the kind's policy reads from the message and their demands", async () => {
    const { notifications, subscriber } = setup();
    const seen: [number, number][][] = [];
    const policy = (message: string, demands: ReadonlyMap<number, number>): number => {
      seen.push([...demands.entries()]);
      return Number(message);
    };
    const waiters = [1, 1, 3, 1].map(
      (demand) => notifications.join('permits:coupons', false, policy, demand).waiter,
    );
    await vi.advanceTimersByTimeAsync(0);
    const ended = watch(waiters);
    subscriber.publish('permits:coupons', '0');
    subscriber.publish('permits:coupons', '2');
    await vi.advanceTimersByTimeAsync(0);
    expect(ended).toEqual(['attempt', 'attempt', undefined, undefined]);
    expect(seen[0]).toEqual([
      [1, 3],
      [3, 1],
    ]);
    // Those two are awake and trying: the next message goes to the ones still asleep.
    subscriber.publish('permits:coupons', '1');
    await vi.advanceTimersByTimeAsync(0);
    expect(ended).toEqual(['attempt', 'attempt', 'attempt', undefined]);
  });

  it('keeps a channel for the linger time after its last waiter left, then unsubscribes', async () => {
    const { notifications, subscriber } = setup();
    const { waiter } = notifications.join('unlock:orders', false);
    await vi.advanceTimersByTimeAsync(0);
    waiter.leave(true);
    await vi.advanceTimersByTimeAsync(LINGER_MS - 1);
    expect(subscriber.unsubscribed).toEqual([]);
    // A waiter that comes back meanwhile finds it subscribed still.
    const again = notifications.join('unlock:orders', false);
    expect(again.fresh).toBe(false);
    await vi.advanceTimersByTimeAsync(2 * LINGER_MS);
    expect(subscriber.unsubscribed).toEqual([]);
    again.waiter.leave(true);
    await vi.advanceTimersByTimeAsync(LINGER_MS);
    expect(subscriber.unsubscribed).toEqual(['unlock:orders']);
    expect(notifications.channelCount).toBe(0);
    expect(notifications.join('unlock:orders', false).fresh).toBe(true);
  });

  it('subscribes the grant channel once, with the first wait that needs it, and hands it what it hears', async () => {
    const { notifications, subscriber, grants } = setup();
    notifications.join('unlock:orders', false);
    await vi.advanceTimersByTimeAsync(0);
    expect(notifications.grantsReady).toBe(false);
    const { waiter } = notifications.join('unlock:invoices', true);
    notifications.join('unlock:receipts', true);
    await waiter.untilReady(Number.POSITIVE_INFINITY, undefined);
    expect(notifications.grantsReady).toBe(true);
    expect(subscriber.subscribed.filter((channel) => channel === GRANTS)).toHaveLength(1);
    subscriber.publish(GRANTS, 't1');
    expect(grants).toEqual(['t1']);
  });

  it('wakes every waiter of every channel to try again after a reconnect', async () => {
    const { notifications } = setup();
    const waiters = ['unlock:orders', 'unlock:orders', 'unlock:invoices'].map(
      (channel) => notifications.join(channel, false).waiter,
    );
    await vi.advanceTimersByTimeAsync(0);
    const ended = watch(waiters);
    notifications.resubscribed();
    await vi.advanceTimersByTimeAsync(0);
    expect(ended).toEqual(['attempt', 'attempt', 'attempt']);
    expect(notifications.generationOf('unlock:orders')).toBe(1);
  });

  it('drops a channel whose subscription failed for good, so the next waiter subscribes anew', async () => {
    const { notifications, subscriber } = setup();
    // A refusal of the server, not an outage: it is not tried again.
    subscriber.failure = new ErrorReply('NOPERM this user has no permissions to access the channel');
    const { waiter } = notifications.join('unlock:orders', false);
    await expect(waiter.untilReady(Number.POSITIVE_INFINITY, undefined)).rejects.toBe(subscriber.failure);
    expect(notifications.channelCount).toBe(0);
    subscriber.failure = undefined;
    expect(notifications.join('unlock:orders', false).fresh).toBe(true);
  });

  it('fails every wait on close, closes the connection, and refuses to join after', async () => {
    const { notifications, subscriber } = setup();
    const waiters = ['unlock:orders', 'unlock:invoices'].map(
      (channel) => notifications.join(channel, false).waiter,
    );
    await vi.advanceTimersByTimeAsync(0);
    const ended = watch(waiters);
    await notifications.close();
    expect(ended.every((end) => end instanceof ClientClosedError)).toBe(true);
    expect(subscriber.destroyed).toBe(1);
    expect(notifications.channelCount).toBe(0);
    expect(() => notifications.join('unlock:orders', false)).toThrow(ClientClosedError);
  });
});
