import type { LockRedisClient, LockSubscriberClient } from './connection.js';

/** What the subscriber connection reports. @internal */
export interface SubscriberEvents {
  /** A connection error; the client reconnects by itself. */
  onError(error: Error): void;
  /** Ready again after a reconnect: messages sent meanwhile were missed. */
  onReconnect(): void;
}

/**
 * Opens the subscriber connection: a `duplicate()` of the user's node-redis client, connected.
 * @internal
 */
export async function openSubscriber(
  redis: LockRedisClient,
  events: SubscriberEvents,
): Promise<LockSubscriberClient> {
  const subscriber = redis.duplicate();
  subscriber.on('error', (error) => events.onError(error));
  let connected = false;
  subscriber.on('ready', () => {
    // The first 'ready' is the initial connection; later ones follow a reconnect.
    if (connected) events.onReconnect();
    connected = true;
  });
  try {
    await subscriber.connect();
  } catch (error) {
    try {
      subscriber.destroy();
    } catch {
      // Nothing to close.
    }
    throw error;
  }
  return subscriber;
}

/**
 * Why `redis` cannot be used as a standalone node-redis client, or undefined when it can.
 * @internal
 */
export function nodeRedisProblem(redis: unknown): 'not-a-client' | 'cluster' | undefined {
  const candidate = redis as Partial<Record<'sendCommand' | 'duplicate', unknown>> | null;
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.sendCommand !== 'function' ||
    typeof candidate.duplicate !== 'function'
  ) {
    return 'not-a-client';
  }
  if (typeof (redis as { nodeClient?: unknown }).nodeClient === 'function') return 'cluster';
  return undefined;
}
