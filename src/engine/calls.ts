import { randomBytes } from 'node:crypto';
import { ClientClosedError, LockError } from '../errors.js';
import type { ScriptRunner } from '../scripts/runner.js';
import { toError } from './events.js';
import type { Reachability } from './reachability.js';
import type { Replication } from './replication.js';
import { readRetried, retryAfter } from './retry.js';
import type { ScriptCall } from './script-call.js';

/** A write's raw reply and how many replicas acknowledged it (see {@link Calls.synced}). @internal */
export interface Synced {
  readonly reply: unknown;
  readonly acknowledged: number;
}

/** A reply without `syncReplicas`: no replica to count, so nothing falls short. */
function unreplicated(reply: unknown): Synced {
  return { reply, acknowledged: Number.POSITIVE_INFINITY };
}

/** Wraps a failure of Redis itself; keeps latchkey's own errors and abort reasons as they are. @internal */
export function redisError(error: unknown, doing: string): unknown {
  if (error instanceof LockError) return error;
  return new LockError('REDIS_ERROR', `Redis failed while ${doing}: ${toError(error).message}`, {
    cause: error,
  });
}

function noop(): void {}

/** One try of a script call within `timeoutMs`. */
type TryOnce<T> = (call: ScriptCall, timeoutMs: number) => Promise<T>;

/**
 * How the engine talks to Redis: the transport of script calls and plain commands. A script call
 * goes out once ({@link Calls.once}), or is retried by the policy of `retry.ts` while that is
 * worth it and never past a deadline ({@link Calls.idempotent}, {@link Calls.synced}); with
 * `syncReplicas`, a write's wait for replicas goes right behind each try. Replies come back raw:
 * the caller reads them through the call's own `decode`. Every call's failure, and while an
 * outage is suspected every answer, is told to the client's {@link Reachability}.
 * @internal
 */
export class Calls {
  readonly #runner: ScriptRunner;
  readonly #isClosed: () => boolean;
  readonly #reach: Reachability;
  readonly #requestPrefix = randomBytes(6).toString('hex');
  #requestCounter = 0;
  /** One try of a script call; made once, as every call on the hot path uses it. */
  readonly #runOne: TryOnce<unknown> = (call, timeoutMs) =>
    this.#runner.run(call.script, call.keys, call.args, timeoutMs);
  /** One try of a write: with the replicas' wait behind it under `syncReplicas`. */
  readonly #writeOne: TryOnce<Synced>;
  /** How long one call may take, in milliseconds. */
  readonly timeoutMs: number;
  /** `syncReplicas`: writes that grant wait for replicas; undefined when off. */
  readonly replication: Replication | undefined;

  constructor(
    runner: ScriptRunner,
    timeoutMs: number,
    isClosed: () => boolean,
    reach: Reachability,
    replication?: Replication,
  ) {
    this.#runner = runner;
    this.timeoutMs = timeoutMs;
    this.#isClosed = isClosed;
    this.#reach = reach;
    this.replication = replication;
    this.#writeOne =
      replication === undefined
        ? (call, callTimeoutMs) => this.#runOne(call, callTimeoutMs).then(unreplicated)
        : (call, callTimeoutMs) => this.#syncedOnce(replication, call, callTimeoutMs);
  }

  /**
   * `sent` (sent at `sentAt`, for `key`), watched for reachability: its failure, and its answer
   * while an outage is suspected, are told to the client's {@link Reachability}.
   */
  #watched<T>(sent: Promise<T>, sentAt: number, key: string | undefined): Promise<T> {
    const reach = this.#reach;
    return sent.then(
      (value) => {
        reach.answered();
        return value;
      },
      (error: unknown) => {
        reach.failed(error, sentAt, key);
        throw error;
      },
    );
  }

  /** While an outage is suspected, tells the {@link Reachability} when `sent` is answered. */
  #noticed(sent: Promise<unknown>): void {
    const reach = this.#reach;
    if (reach.watching) sent.then(reach.answered, noop);
  }

  /** Whether the user closed the Redis client: no call will get through again. */
  get connectionClosed(): boolean {
    return this.#runner.connectionClosed;
  }

  /** Tells the connection the server's version (it may choose sharded pub/sub by it). */
  noteServerVersion(version: string): void {
    this.#runner.noteServerVersion(version);
  }

  /** A new id for a request, unique to this client. */
  nextRequestId(): string {
    this.#requestCounter += 1;
    return `${this.#requestPrefix}${this.#requestCounter.toString(36)}`;
  }

  /**
   * One try of a write, no retry, within `timeoutMs` (plus the replicas' wait under
   * `syncReplicas`): its reply and the replicas that acknowledged it (`Infinity` without
   * `syncReplicas`). Its failures are the caller's, to retry with {@link Calls.retry} or report.
   */
  once(call: ScriptCall, timeoutMs: number): Promise<Synced> {
    const sent = this.#writeOne(call, timeoutMs);
    this.#noticed(sent);
    return sent;
  }

  /**
   * Runs a script whose every call is safe to repeat, retrying transient failures with backoff
   * while `keepTrying()` says so, and never past `until` (monotonic ms). `repeat` makes the call
   * to send again, when a repeated call must say that it is one (made only if needed).
   */
  idempotent(
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until = Number.POSITIVE_INFINITY,
    repeat?: () => ScriptCall,
  ): Promise<unknown> {
    return this.#retrying(this.#runOne, call, keepTrying, until, repeat);
  }

  /**
   * {@link Calls.idempotent} for a write that must reach replicas (`syncReplicas`): each try is
   * the script call with the wait command written right behind it, and resolves with the
   * script's reply and the replicas that acknowledged it. Without `syncReplicas`, the reply and
   * `Infinity`.
   */
  synced(
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until = Number.POSITIVE_INFINITY,
    repeat?: () => ScriptCall,
  ): Promise<Synced> {
    return this.#retrying(this.#writeOne, call, keepTrying, until, repeat);
  }

  /**
   * What {@link Calls.synced} does once its first try failed with `error`, for a caller that
   * sent that try itself with {@link Calls.once} and the command timeout.
   */
  retry(error: unknown, call: ScriptCall, keepTrying: (attempt: number) => boolean): Promise<Synced> {
    this.#reach.failed(error, undefined, call.keys[0]);
    return this.#retry(error, this.#writeOne, call, keepTrying, Number.POSITIVE_INFINITY, undefined);
  }

  async #syncedOnce(replication: Replication, call: ScriptCall, timeoutMs: number): Promise<Synced> {
    const wait = await replication.command();
    const { reply, then } = await this.#runner.runThen(
      call.script,
      call.keys,
      call.args,
      wait,
      timeoutMs,
      replication.timeoutMs,
    );
    return { reply, acknowledged: replication.acknowledged(then) };
  }

  /**
   * The first try goes out directly, with no async frame or closure of its own: the retry
   * machinery is for the rare failure, not the hot path of every acquire and release.
   */
  #retrying<T>(
    tryOnce: TryOnce<T>,
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until: number,
    repeat: (() => ScriptCall) | undefined,
  ): Promise<T> {
    const sentAt = performance.now();
    const sent = tryOnce(call, this.#tryTimeout(until, sentAt));
    this.#noticed(sent);
    return sent.catch((error: unknown) => {
      this.#reach.failed(error, sentAt, call.keys[0]);
      return this.#retry(error, tryOnce, call, keepTrying, until, repeat);
    });
  }

  /** How long one try may take: the command timeout, and never past `until`. */
  #tryTimeout(until: number, now: number): number {
    return Math.max(1, Math.min(this.timeoutMs, until - now));
  }

  /** After a first try failed with `error`: tries again, by the retry policy, while it allows. */
  #retry<T>(
    error: unknown,
    tryOnce: TryOnce<T>,
    call: ScriptCall,
    keepTrying: (attempt: number) => boolean,
    until: number,
    repeat: (() => ScriptCall) | undefined,
  ): Promise<T> {
    let again: ScriptCall | undefined;
    const tryAgain = (): Promise<T> => {
      // The repeated call is made only once a retry is due.
      again ??= repeat?.() ?? call;
      const sentAt = performance.now();
      return this.#watched(tryOnce(again, this.#tryTimeout(until, sentAt)), sentAt, again.keys[0]);
    };
    return retryAfter(error, tryAgain, { isClosed: this.#isClosed, keepTrying, until });
  }

  /** A plain command, one try within the command timeout; failures as the runner gives them. */
  sendOnce(args: string[]): Promise<unknown> {
    if (this.#isClosed()) return Promise.reject(new ClientClosedError());
    return this.#watched(this.#runner.send(args), performance.now(), undefined);
  }

  /** A plain command (a read), retried twice on transient failures. */
  async command(args: string[], doing: string): Promise<unknown> {
    if (this.#isClosed()) throw new ClientClosedError();
    try {
      return await readRetried(
        () => this.#watched(this.#runner.send(args), performance.now(), undefined),
        this.#isClosed,
      );
    } catch (error) {
      throw redisError(error, doing);
    }
  }
}
