/**
 * Closing the subscriptions while the subscriber connection is still being opened (a server that
 * is down or frozen never finishes the handshake): close() returns at once, the waiter is told,
 * and the connection is closed as soon as it opens.
 */
import { describe, expect, it } from 'vitest';
import { ClientClosedError } from '../../src/errors.js';
import { Notifications } from '../../src/engine/wait/channels.js';
import type { Subscriber } from '../../src/redis/connection.js';

class RecordingSubscriber implements Subscriber {
  destroyed = 0;
  subscribe(): Promise<unknown> {
    return Promise.resolve();
  }
  unsubscribe(): Promise<unknown> {
    return Promise.resolve();
  }
  unref(): void {}
  ref(): void {}
  destroy(): void {
    this.destroyed += 1;
  }
}

function pendingConnection(): {
  notifications: Notifications;
  open: (subscriber: Subscriber) => void;
} {
  let open!: (subscriber: Subscriber) => void;
  const connecting = new Promise<Subscriber>((resolve) => {
    open = resolve;
  });
  const notifications = new Notifications(
    {
      connect: () => connecting,
      grantChannel: 'latchkey_grant:test',
      grantListener: () => () => undefined,
      onError: () => undefined,
      closedError: () => new ClientClosedError(),
    },
    1_000,
  );
  return { notifications, open };
}

describe('Notifications.close while the subscriber is still connecting', () => {
  it('returns within its short wait, rejects the waiter, and closes the connection once it opens', async () => {
    const { notifications, open } = pendingConnection();
    const { waiter } = notifications.join('redisson_lock__channel:{orders}', false);
    const ready = waiter.untilReady(60_000, undefined).then(
      () => 'ready',
      (error: unknown) => error,
    );
    const startedAt = performance.now();
    await notifications.close();
    expect(performance.now() - startedAt).toBeLessThan(1_000);
    expect(await ready).toBeInstanceOf(ClientClosedError);

    const late = new RecordingSubscriber();
    open(late);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(late.destroyed).toBe(1);
  });
});
