import type { ReplicationError } from '../errors.js';
import { isServerReply } from '../redis/replies.js';
import type { ScriptRunner } from '../scripts/runner.js';
import { abortable, within } from './timing.js';

/**
 * How long an acquire waits before it tries again after a grant too few replicas acknowledged
 * (doubled each time, up to the maximum): the replicas are lagging or gone, so trying again at
 * once would most likely fail the same way.
 */
const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 1_000;

/** A grant too few replicas acknowledged, and the rollback under way. @internal */
export interface Unreplicated {
  readonly unreplicated: ReplicationError;
  readonly rollback: Promise<void>;
}

/**
 * Runs `once` again, with backoff, while it reports a grant that was rolled back for too few
 * acknowledgements and the deadline (monotonic ms) leaves room; after that rejects with the
 * last ReplicationError, once its rollback is done (or `rollbackWaitMs` passed). Rejects with
 * `signal.reason` on abort, at once.
 * @internal
 */
export async function retryUnreplicated<T extends object>(
  once: () => Promise<T | Unreplicated>,
  deadline: number,
  signal: AbortSignal | undefined,
  assertOpen: () => void,
  rollbackWaitMs: number,
): Promise<T> {
  let backoffMs = RETRY_MIN_MS;
  for (;;) {
    const outcome = await once();
    if (!('unreplicated' in outcome)) return outcome;
    if (performance.now() + backoffMs >= deadline) {
      // Nothing is held when the call rejects, as long as Redis answers the rollback in time.
      await within(outcome.rollback, rollbackWaitMs);
      throw outcome.unreplicated;
    }
    const pause = new Promise<void>((resolve) => setTimeout(resolve, backoffMs).unref());
    await (signal === undefined ? pause : abortable(pause, signal));
    assertOpen();
    backoffMs = Math.min(RETRY_MAX_MS, backoffMs * 2);
  }
}

/** `syncReplicas` as validated by the client. @internal */
export interface ReplicationSettings {
  /** Replicas that must acknowledge a write. */
  readonly count: number;
  /** How long the server waits for them, in milliseconds. */
  readonly timeoutMs: number;
}

/** The command that waits for replicas, as the master's persistence asks for it. */
type WaitKind = 'WAIT' | 'WAITAOF';

/**
 * The command sent behind each write that grants (`syncReplicas`): `WAIT count timeout`, or
 * `WAITAOF 0 count timeout` when the master appends to an AOF, so the replicas' acknowledgement
 * means "fsynced" rather than "received". Which one is found out once per client with
 * `INFO persistence`; a server that refuses INFO, or refuses WAITAOF (before 7.2, or an ACL),
 * gets WAIT.
 * @internal
 */
export class Replication {
  readonly count: number;
  readonly timeoutMs: number;
  readonly #runner: ScriptRunner;
  #kind: WaitKind | undefined;
  #asking: Promise<WaitKind> | undefined;

  constructor(settings: ReplicationSettings, runner: ScriptRunner) {
    this.count = settings.count;
    this.timeoutMs = settings.timeoutMs;
    this.#runner = runner;
  }

  /** The wait command to send behind a write (asks the server the first time). */
  async command(): Promise<string[]> {
    this.#kind ??= await (this.#asking ??= this.#ask().finally(() => {
      this.#asking = undefined;
    }));
    const count = String(this.count);
    const timeout = String(this.timeoutMs);
    return this.#kind === 'WAITAOF' ? ['WAITAOF', '0', count, timeout] : ['WAIT', count, timeout];
  }

  /**
   * The replicas that acknowledged, read from the wait command's reply (`WAIT`: a number;
   * `WAITAOF`: `[local, replicas]`); 0 for a failure. A server that refuses WAITAOF (unknown
   * before 7.2, or not granted to an ACL user) turns this client to WAIT for good.
   */
  acknowledged(reply: unknown): number {
    if (reply instanceof Error) {
      // Unknown before Redis 7.2, or not granted to an ACL user: WAIT it is, from now on.
      if (this.#kind === 'WAITAOF' && isServerReply(reply)) this.#kind = 'WAIT';
      return 0;
    }
    const value = Array.isArray(reply) ? (reply[1] as unknown) : reply;
    const acks = Number(value);
    return Number.isFinite(acks) ? acks : 0;
  }

  async #ask(): Promise<WaitKind> {
    try {
      const info = await this.#runner.send(['INFO', 'persistence']);
      return typeof info === 'string' && /^aof_enabled:1\b/m.test(info) ? 'WAITAOF' : 'WAIT';
    } catch (error) {
      // Refused (an ACL): WAIT, for good. Not reached: WAIT for now, and ask again next time.
      if (error instanceof Error && isServerReply(error)) return 'WAIT';
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}
