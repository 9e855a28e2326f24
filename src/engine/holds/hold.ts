import { LockNotOwnedError, type LockLostError } from '../../errors.js';
import { chainId } from '../chains.js';
import type { Target } from '../types.js';

/** What releasing a hold that was already lost rejects with: it says why it was lost. */
export function lostRelease(hold: Hold): LockNotOwnedError {
  const lost = hold.lostError;
  const why = lost === undefined ? `Lock "${hold.name}" was lost` : lost.message;
  return new LockNotOwnedError(`This lease cannot be released: ${why}`, { cause: lost });
}

/**
 * One owner's hold on one lock, shared by every {@link Lease} that owner got for it.
 * @internal
 */
export class Hold {
  /** The lock held, and the kind's protocol for it. */
  readonly target: Target;
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
  /** The owner's hold count as last confirmed by Redis. */
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
  /**
   * Monotonic time at which the hold was first confirmed; 0 before that, and again once the hold
   * ended and its hold time was recorded.
   */
  acquiredAt = 0;
  /** Reported as held for longer than `longHoldWarningMs`. */
  reportedLong = false;
  /**
   * Declares the hold lost at once if it is past its {@link Hold.deadline}: set by whoever tracks
   * the hold, and called before every check of it made through a lease (see
   * {@link Hold.verify}), so that no such check reads "held" past the deadline while the timer
   * that would declare the loss is still due (after a stall, or an event loop blocked).
   */
  onVerify: ((hold: Hold) => void) | undefined;
  /** Made on first use: most holds are released without anyone asking for their signal. */
  #controller: AbortController | undefined;

  /** `chain` is {@link chainId} of key and field, passed in so one string serves every lookup. */
  constructor(
    target: Target,
    field: string,
    ttlMs: number,
    watchdog: boolean,
    chain = chainId(target.key, field),
  ) {
    this.target = target;
    this.name = target.name;
    this.key = target.key;
    this.channel = target.channel;
    this.field = field;
    this.ttlMs = ttlMs;
    this.watchdog = watchdog;
    this.chain = chain;
  }

  /**
   * Aborts with {@link Hold.lostError} once the hold is lost. Its `aborted`, `reason` and
   * `throwIfAborted()` verify the hold first, so they report the loss from the moment the
   * deadline passes by the monotonic clock, whatever callbacks run before the expiry timer.
   */
  get signal(): AbortSignal {
    let controller = this.#controller;
    if (controller === undefined) {
      controller = this.#controller = new AbortController();
      if (this.lostError === undefined) verifiedOnRead(controller.signal, this);
      else controller.abort(this.lostError);
    }
    this.verify();
    return controller.signal;
  }

  /** Declares the hold lost now if it is past its deadline (see {@link Hold.onVerify}). */
  verify(): void {
    if (this.lostError === undefined) this.onVerify?.(this);
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

/** AbortSignal's own `aborted` or `reason`, read past the properties that shadow them. */
function native(signal: AbortSignal, property: 'aborted' | 'reason'): unknown {
  return Reflect.get(AbortSignal.prototype, property, signal);
}

/**
 * Makes every read of `signal` (`aborted`, `reason`, `throwIfAborted()`) call `checked.verify()`
 * first, which aborts it if what it stands for was lost by the clock: a hold's signal, a
 * multi-lease's.
 * The abort itself is synchronous (the `abort` event is dispatched before the read returns), so
 * a listener given the signal hears of the loss in the same turn as the code that checked it.
 * @internal
 */
export function verifiedOnRead(signal: AbortSignal, checked: { verify(): void }): void {
  Object.defineProperties(signal, {
    aborted: {
      configurable: true,
      get: (): boolean => {
        checked.verify();
        return native(signal, 'aborted') === true;
      },
    },
    reason: {
      configurable: true,
      get: (): unknown => {
        checked.verify();
        return native(signal, 'reason');
      },
    },
    throwIfAborted: {
      configurable: true,
      writable: true,
      value: (): void => {
        checked.verify();
        if (native(signal, 'aborted') === true) throw native(signal, 'reason');
      },
    },
  });
}
