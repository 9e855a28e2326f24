// The connections of a pub/sub floor: a node-redis client for commands and its duplicate for
// subscriptions. Their errors are left to the calls that meet them, as the run reports what a
// contender's calls throw.
import { createClient } from 'redis';

export type FloorClient = ReturnType<typeof createClient>;

export interface FloorClients {
  readonly redis: FloorClient;
  readonly subscriber: FloorClient;
  readonly close: () => Promise<void>;
}

export async function connectFloorClients(url: string, name: string): Promise<FloorClients> {
  const redis = createClient({ url, name });
  redis.on('error', () => undefined);
  await redis.connect();
  const subscriber = redis.duplicate();
  subscriber.on('error', () => undefined);
  await subscriber.connect();
  return {
    redis,
    subscriber,
    close: () => {
      subscriber.destroy();
      redis.destroy();
      return Promise.resolve();
    },
  };
}
