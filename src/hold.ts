import type { LockLostError } from './errors.js';

/**
 * One owner's hold on one lock, shared by every {@link Lease} that owner got for it.
 * @internal
 */
export class Hold {
  readonly name: string;
  readonly key: string;
  readonly channel: string;
  /** The owner's hash field. Secret: never put it in a message, an event or a log line. */
  readonly field: string;
  /** TTL set on every acquire, renewal and partial release, in milliseconds. */
  readonly ttlMs: number;
  /** Renewed by the watchdog (no explicit `leaseMs`). */
  readonly watchdog: boolean;
  /** Holds confirmed in Redis. */
  count = 0;
  /** Releases under way; a release that will bring the count to 0 stops renewal at once. */
  releasing = 0;
  /**
   * Monotonic time (performance.now()) until which the lock is known to be held: the start of
   * the last request that set its TTL, plus the TTL.
   */
  validUntil = 0;
  lostError: LockLostError | undefined;
  /**
   * Request key of a last release whose outcome Redis never confirmed: a release asked for
   * again sends the same request, so it learns what the first one did.
   */
  unconfirmedRelease: string | undefined;
  readonly controller = new AbortController();

  constructor(name: string, key: string, channel: string, field: string, ttlMs: number, watchdog: boolean) {
    this.name = name;
    this.key = key;
    this.channel = channel;
    this.field = field;
    this.ttlMs = ttlMs;
    this.watchdog = watchdog;
  }

  get lost(): boolean {
    return this.lostError !== undefined;
  }

  /**
   * When the client gives the lock up for lost if no renewal has been confirmed: a little
   * before `validUntil`, for timer lateness and clock drift, so loss is declared before the
   * server's TTL can lapse.
   */
  get deadline(): number {
    return this.validUntil - (Math.floor(this.ttlMs * 0.01) + 2);
  }

  /** Records a request that set the TTL and started at `startedAt`. */
  extend(startedAt: number): void {
    this.validUntil = Math.max(this.validUntil, startedAt + this.ttlMs);
  }
}

/**
 * Runs operations on one (lock, owner) pair one at a time. Every lock script carries the hold
 * count it expects, which is what makes a retried call safe; that needs no two calls for the
 * same owner field in flight at once.
 * @internal
 */
export class OperationChains {
  readonly #tails = new Map<string, Promise<void>>();

  /**
   * Runs `operation` after every earlier one on the same chain. An operation can hand back its
   * result early and keep the chain busy with clean-up work through `keepBusy`.
   */
  run<T>(chain: string, operation: (keepBusy: (work: Promise<unknown>) => void) => Promise<T>): Promise<T> {
    const previous = this.#tails.get(chain);
    const extra: Promise<unknown>[] = [];
    const keepBusy = (work: Promise<unknown>): void => {
      extra.push(work);
    };
    const result = previous === undefined ? operation(keepBusy) : previous.then(() => operation(keepBusy));
    const tail = result
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => Promise.allSettled(extra))
      .then(() => undefined);
    this.#tails.set(chain, tail);
    void tail.then(() => {
      if (this.#tails.get(chain) === tail) this.#tails.delete(chain);
    });
    return result;
  }

  get size(): number {
    return this.#tails.size;
  }
}

/** @internal */
export function chainId(key: string, field: string): string {
  return `${key}\n${field}`;
}
