// The small interface every contender adapter implements, so scenarios never know which lock
// library they are driving.

export const CONTENDER_NAMES = [
  'latchkey',
  'redlock',
  'sesame-redlock',
  'redis-semaphore',
  'node-redisson',
  'simple-redis-mutex',
  'floor-setnx',
  'floor-2evalsha',
  'floor-pubsub',
  'floor-rlock',
  'latchkey-fenced',
  'latchkey-simple',
  'latchkey-fair',
  'latchkey-rw',
  'latchkey-semaphore',
  'latchkey-permits',
  'latchkey-ioredis',
  'latchkey-iovalkey',
  'latchkey-glide',
  'rs-semaphore',
  'rs-multisemaphore',
] as const;

export type ContenderName = (typeof CONTENDER_NAMES)[number];

/** How a contender waits for a lock that someone else holds. */
export type WaitStyle = 'pubsub' | 'polling' | 'none';

export interface Capabilities {
  readonly wait: WaitStyle;
  /** The same owner may take the lock again while holding it. */
  readonly reentrant: boolean;
  /** Some background renewal keeps a held lock alive (a watchdog or a refresh timer). */
  readonly renews: boolean;
  /** A reference floor, not a lock library. */
  readonly floor: boolean;
  /**
   * Set for a contender that stands for one more kind of synchronizer (a latchkey kind beside
   * the reentrant lock, or a peer's semaphore): it is compared on the uncontended cycle, the
   * hand-off and 8 contenders, not on every scenario, to keep the run's length in bounds.
   */
  readonly kind?: string;
  /** A semaphore: the session takes `permits` from {@link SessionOptions} (default 1). */
  readonly permits?: boolean;
  /**
   * Scenario names a floor is made for (e.g. only the hand-off), or that a variant of a
   * contender on another client runs in; every other scenario skips it. Undefined: every
   * scenario that can run it.
   */
  readonly scenarios?: readonly string[];
}

export interface SessionOptions {
  readonly url: string;
  /** CLIENT SETNAME for the session's connections, so the server side can tell them apart. */
  readonly name: string;
  /**
   * Lease (or watchdog timeout) to use instead of the library default, for scenarios that must
   * see renewals within seconds. Undefined: the library's default.
   */
  readonly leaseMs?: number;
  /** Permits of a semaphore contender's semaphore; 1 (a mutex) when undefined. */
  readonly permits?: number;
}

export interface Held {
  release(): Promise<void>;
  /** The lock's Redis key, when the contender tells it (the many-keys scenario samples its PTTL). */
  readonly redisKey?: string;
}

/** A kind whose waiter's heap the many-keys scenario measures beside a lock waiter's. */
export type WaiterKind = 'semaphore' | 'latch';

/** How a session holds one kind's key and waits on it, for {@link Session.waiterKinds}. */
export interface KindWaits {
  /** Takes the key so that a waiter has to wait (a semaphore's only permit, a latch's count). */
  hold(key: string): Promise<Held>;
  /** Waits until the key's holder releases it. */
  wait(key: string): Promise<unknown>;
}

export interface Session {
  acquire(key: string): Promise<Held>;
  /**
   * Runs `body` while holding `key`; `reenter` takes the same lock again as the same owner.
   * Present only for reentrant contenders.
   */
  withReentry?(key: string, body: (reenter: () => Promise<Held>) => Promise<void>): Promise<void>;
  /**
   * Times the contender gave up waiting at its own defaults and the adapter tried again (an
   * outer retry loop); 0 for contenders that wait until they get the lock.
   */
  readonly giveUps: number;
  /**
   * Holds this session's library has reported lost so far (latchkey's `lockLost` events);
   * undefined for a contender that does not report losing a lock.
   */
  readonly locksLost?: number;
  /**
   * The other kinds of the same library whose waiters the many-keys scenario weighs against a
   * lock waiter (latchkey only); undefined for other contenders.
   */
  readonly waiterKinds?: Readonly<Record<WaiterKind, KindWaits>>;
  close(): Promise<void>;
}

export interface Adapter {
  readonly name: ContenderName;
  readonly caps: Capabilities;
  /** Renewal period at `leaseMs` (or at the default when undefined), for renewals per interval. */
  renewIntervalMs?(leaseMs: number | undefined): number;
  connect(options: SessionOptions): Promise<Session>;
}
