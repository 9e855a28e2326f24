/**
 * Options of {@link RedlockClient}; all optional.
 *
 * @example
 * ```ts
 * const locks = new RedlockClient([redisA, redisB, redisC], { nodeTimeoutMs: 50 });
 * ```
 */
export interface RedlockClientOptions {
  /**
   * The lease every master sets while the watchdog keeps the lock, in milliseconds; renewed on
   * every master every third of it. At least ten times `nodeTimeoutMs`.
   * @defaultValue 30_000
   */
  readonly watchdogTimeoutMs?: number;
  /**
   * How long one call to one master may take, in milliseconds: an acquire, release or renewal
   * that a master has not answered by then counts as a failure on that master. Keep it far below
   * the lease, so a slow or paused master costs a round little of the lock's validity. A whole
   * number from 1.
   * @defaultValue 200
   */
  readonly nodeTimeoutMs?: number;
  /**
   * The longest pause between two rounds of a waiting acquire, in milliseconds, when no master
   * that refused the lock in the last round announces an unlock first. Each pause is drawn at
   * random between half of it and all of it, so contenders that split the masters between them
   * do not keep meeting again. A whole number from 1.
   * @defaultValue 200
   */
  readonly retryDelayMs?: number;
  /** Prepended to every lock name to make its key, on every master. @defaultValue `''` */
  readonly keyPrefix?: string;
  /**
   * How long a subscription to a lock's unlock channel is kept on each master after its last
   * waiter left, in milliseconds.
   * @defaultValue 5_000
   */
  readonly subscriptionLingerMs?: number;
}
