/**
 * The parts of a node-redis client latchkey uses. A client from `createClient()` of the
 * `redis` package (v5 or later) fits; latchkey never closes it.
 */
export interface LockRedisClient {
  sendCommand(args: string[], options?: { abortSignal?: AbortSignal }): Promise<unknown>;
  duplicate(): LockSubscriberClient;
  /** Connected and ready: a command sent now is written out at once. */
  readonly isReady?: boolean;
}

/**
 * The subscriber connection latchkey opens with `duplicate()` for unlock notifications, and
 * closes in {@link LockClient.close}.
 */
export interface LockSubscriberClient {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  unsubscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'ready', listener: () => void): unknown;
  destroy(): unknown;
}
