import { isServerReply } from '../redis/replies.js';
import type { ScriptRunner } from '../scripts/runner.js';

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
