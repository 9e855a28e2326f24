import { ClientClosedError, LockError } from '../errors.js';
import { isServerReply } from '../redis/replies.js';
import { isTransient } from '../scripts/runner.js';
import { toError, type Events } from './events.js';

/** @internal */
export interface ReachabilitySettings {
  /** How long Redis may go unanswered before it is reported: the command timeout, in ms. */
  readonly thresholdMs: number;
  /** Whether to emit the events and the warning at all (off: only {@link Reachability.watching}). */
  readonly report: boolean;
  /** The name of the lock (semaphore, latch) whose own key `key` is; undefined for any other key. */
  readonly nameOf: (key: string) => string | undefined;
}

/** An outage as far as this client knows: since when nothing answered, and the latest failure. */
interface Outage {
  /** Monotonic ms: the send of the first call that went unanswered since the last answer. */
  readonly since: number;
  error: Error;
  key: string | undefined;
  reported: boolean;
}

/**
 * Whether `error` says that Redis could not be reached or would not serve: no reply in time, a
 * lost or refused connection, or a "not now" reply (LOADING, READONLY, MASTERDOWN, …). A reply
 * that refuses the command for good, a closed client and latchkey's own errors say nothing of it.
 * @internal
 */
export function isUnreachable(error: unknown): boolean {
  return (
    error instanceof Error &&
    !(error instanceof LockError) &&
    !(error instanceof ClientClosedError) &&
    isTransient(error)
  );
}

/**
 * Whether this client's calls reach Redis. Told of every try that went unanswered (an acquire's, a
 * wait's, a read's, any retry; of a renewal's or a release's first try only the answer, as their
 * failures have events and retries of their own), of the subscriber connection's failures, and,
 * while an outage is suspected, of every answer. When nothing has answered for the command timeout
 * since the first unanswered try was sent, it emits `redisUnreachable` (and, the first time on
 * the client, a process warning), and `redisReachable` at the next answer. Calls go on as they
 * would: this only reports. Cheap while Redis answers: one boolean read per call.
 * @internal
 */
export class Reachability {
  readonly #settings: ReachabilitySettings;
  readonly #events: Events;
  #outage: Outage | undefined;
  /** Monotonic ms of the latest answer seen while an outage was suspected. */
  #answeredAt = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | undefined;
  #warned = false;
  #closed = false;

  constructor(settings: ReachabilitySettings, events: Events) {
    this.#settings = settings;
    this.#events = events;
  }

  /** Whether an outage is suspected: answers are worth telling {@link Reachability.answered} then. */
  get watching(): boolean {
    return this.#outage !== undefined;
  }

  /** Redis answered (a reply, or an error reply that is not a "not now"). */
  readonly answered = (): void => {
    const outage = this.#outage;
    if (outage === undefined) return;
    const now = performance.now();
    this.#answeredAt = now;
    this.#outage = undefined;
    this.#clearTimer();
    if (outage.reported && !this.#closed && this.#settings.report) {
      this.#events.emit('redisReachable', { downForMs: Math.round(now - outage.since) });
    }
  };

  /**
   * A call sent at `sentAt` (monotonic ms; default now) failed with `error`; `key` is the first
   * key of its script, if it had one. Failures that say nothing of reachability are ignored.
   */
  failed(error: unknown, sentAt = performance.now(), key?: string): void {
    if (this.#closed) return;
    if (!isUnreachable(error)) {
      // Refused for good: the server did answer.
      if (error instanceof Error && isServerReply(error)) this.answered();
      return;
    }
    let outage = this.#outage;
    if (outage === undefined) {
      // A call sent before the latest answer says nothing of the time before that answer.
      outage = { since: Math.max(sentAt, this.#answeredAt), error: toError(error), key, reported: false };
      this.#outage = outage;
    } else {
      outage.error = toError(error);
      if (key !== undefined) outage.key = key;
    }
    if (!outage.reported && this.#timer === undefined) this.#schedule(outage);
  }

  /**
   * Reports `outage` once it has lasted the threshold: now, or from a timer then. A timer may
   * fire a little early by the monotonic clock: it looks again rather than report early.
   */
  #schedule(outage: Outage): void {
    const dueIn = outage.since + this.#settings.thresholdMs - performance.now();
    if (dueIn <= 0) {
      this.#report(outage);
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#outage === outage && !this.#closed) this.#schedule(outage);
    }, Math.ceil(dueIn));
    this.#timer.unref();
  }

  /** Stops reporting: the client closed. */
  close(): void {
    this.#closed = true;
    this.#clearTimer();
  }

  #clearTimer(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #report(outage: Outage): void {
    if (this.#closed || outage.reported) return;
    outage.reported = true;
    this.#clearTimer();
    if (!this.#settings.report) return;
    const downForMs = Math.round(performance.now() - outage.since);
    const { key, error } = outage;
    const name = key === undefined ? undefined : this.#settings.nameOf(key);
    this.#events.emit('redisUnreachable', {
      ...(name === undefined ? {} : { name, key }),
      downForMs,
      error,
    });
    if (!this.#warned) {
      this.#warned = true;
      process.emitWarning(
        `latchkey: Redis has not answered this client for ${downForMs} ms (${error.message}); further outages on this client are reported by its 'redisUnreachable' event only, and 'redisReachable' says when Redis answers again`,
        { code: 'LATCHKEY_REDIS_UNREACHABLE' },
      );
    }
  }
}
