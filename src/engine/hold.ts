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
  /** {@link chainId} of key and field, made once: holds are looked up by it on every call. */
  readonly chain: string;
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
   * A last release was sent and Redis never confirmed it: asked again, a missing owner field
   * within the lease means that earlier release went through.
   */
  releaseUnconfirmed = false;
  /** Made on first use: most holds are released without anyone asking for their signal. */
  #controller: AbortController | undefined;

  /** `chain` is {@link chainId} of key and field, passed in so one string serves every lookup. */
  constructor(
    name: string,
    key: string,
    channel: string,
    field: string,
    ttlMs: number,
    watchdog: boolean,
    chain = chainId(key, field),
  ) {
    this.name = name;
    this.key = key;
    this.channel = channel;
    this.field = field;
    this.ttlMs = ttlMs;
    this.watchdog = watchdog;
    this.chain = chain;
  }

  /** Aborts with {@link Hold.lostError} once the hold is lost. */
  get signal(): AbortSignal {
    this.#controller ??= new AbortController();
    if (this.lostError !== undefined && !this.#controller.signal.aborted)
      this.#controller.abort(this.lostError);
    return this.#controller.signal;
  }

  /** Records the loss and aborts the signal, if anyone has asked for it. */
  lose(error: LockLostError): void {
    this.lostError = error;
    this.#controller?.abort(error);
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
    let extra: Promise<unknown>[] | undefined;
    const keepBusy = (work: Promise<unknown>): void => {
      (extra ??= []).push(work);
    };
    const result = previous === undefined ? operation(keepBusy) : previous.then(() => operation(keepBusy));
    const forget = (): void => {
      if (this.#tails.get(chain) === tail) this.#tails.delete(chain);
    };
    const settled = (): Promise<void> | void => {
      if (extra === undefined) return forget();
      return Promise.allSettled(extra).then(forget);
    };
    const tail: Promise<void> = result.then(settled, settled);
    this.#tails.set(chain, tail);
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
