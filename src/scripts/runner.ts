import { setMaxListeners } from 'node:events';
import type { RedisConnection } from '../redis/connection.js';
import { isClientClosed, isServerReply, isWithdrawn, plainReply } from '../redis/replies.js';
import type { LuaScript } from './script.js';

/**
 * No reply within the command timeout: the call may or may not have run on the server.
 * @internal
 */
export class CommandTimeoutError extends Error {
  override readonly name = 'CommandTimeoutError';
  /** `connected`: whether the client was connected when the call was given up. */
  constructor(timeoutMs: number, connected: boolean) {
    super(
      `Redis did not answer within ${Math.round(timeoutMs)} ms` +
        (connected ? '' : ': the connection to Redis is down and the client is reconnecting'),
    );
  }
}

/**
 * A command taken back before it was written out, because its connection dropped: it never
 * reached Redis, so it may be sent again.
 * @internal
 */
export class CommandNotSentError extends Error {
  override readonly name = 'CommandNotSentError';
  constructor() {
    super('the connection to Redis dropped before the command was written out; it did not run');
  }
}

// Server replies that mean "not now": the script did not run and may be sent again.
const TRANSIENT_REPLY = /^(LOADING|BUSY|TRYAGAIN|MASTERDOWN|CLUSTERDOWN|READONLY|NOREPLICAS)\b/;
// Before Redis 7 a script whose write a read-only replica refused fails with that error wrapped:
// `ERR Error running script (call to f_<sha>): @user_script:<line>: @user_script: <line>:
// -READONLY You can't write …`. A replica writes nothing, so the call may be sent again too.
const SCRIPT_READONLY = /^ERR Error running script \(call to [^)]*\): .*: -READONLY /;

/**
 * Whether a failed call may succeed if sent again: lost connections, timeouts, a server that
 * is loading or failing over. A closed client and server errors such as WRONGTYPE are not.
 * @internal
 */
export function isTransient(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (isServerReply(error)) return TRANSIENT_REPLY.test(error.message) || SCRIPT_READONLY.test(error.message);
  return !isClientClosed(error);
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/** The EVALSHA of a script call. */
function scriptCommand(script: ScriptVariant, keys: readonly string[], args: readonly string[]): string[] {
  const command = new Array<string>(3 + keys.length + args.length);
  command[0] = 'EVALSHA';
  command[1] = script.sha1;
  command[2] = String(keys.length);
  for (let i = 0; i < keys.length; i += 1) command[3 + i] = keys[i] as string;
  for (let i = 0; i < args.length; i += 1) command[3 + keys.length + i] = args[i] as string;
  return command;
}

/** The digest and source of a script as it is sent: the script itself or its sharded twin. */
type ScriptVariant = Pick<LuaScript, 'sha1' | 'source'>;

/** A command waiting for its reply, linked into the queue of its timeout. */
interface Pending {
  readonly deadline: number;
  readonly expire: () => void;
  prev: Pending | undefined;
  next: Pending | undefined;
}

/**
 * Deadlines of the commands in flight, in order, so one timer for the earliest serves them all
 * instead of one timer per command; a command that gets its reply unlinks itself at once, so
 * nothing is kept for replies already in.
 */
class TimeoutQueue {
  #head: Pending | undefined;
  #tail: Pending | undefined;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = 0;

  add(deadline: number, expire: () => void): Pending {
    // Nearly always the latest deadline: walk back from the tail for the rest.
    let before = this.#tail;
    while (before !== undefined && before.deadline > deadline) before = before.prev;
    const after = before === undefined ? this.#head : before.next;
    const entry: Pending = { deadline, expire, prev: before, next: after };
    if (before === undefined) this.#head = entry;
    else before.next = entry;
    if (after === undefined) this.#tail = entry;
    else after.prev = entry;
    if (this.#timer === undefined || deadline < this.#timerAt) {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#arm(deadline);
    }
    return entry;
  }

  remove(entry: Pending): void {
    if (entry.prev === undefined) {
      if (this.#head !== entry) return;
      this.#head = entry.next;
    } else {
      entry.prev.next = entry.next;
    }
    if (entry.next === undefined) this.#tail = entry.prev;
    else entry.next.prev = entry.prev;
    entry.prev = undefined;
    entry.next = undefined;
  }

  #arm(deadline: number): void {
    this.#timerAt = deadline;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, deadline - performance.now()));
    this.#timer.unref();
  }

  /**
   * Timers run before the event loop reads its sockets, so a reply that came in while the
   * process was frozen or its event loop blocked still waits unread when the timer of its
   * command fires. The commands due are given up one turn later, after the sockets were read: a
   * reply that arrived in time is taken, not thrown away for a timeout.
   */
  #fire(): void {
    this.#timer = undefined;
    const dueBy = Math.max(performance.now(), this.#timerAt);
    if (this.#head === undefined || this.#head.deadline > dueBy) {
      this.#rearm();
      return;
    }
    setImmediate(() => {
      for (let entry = this.#head; entry !== undefined && entry.deadline <= dueBy;) {
        const next = entry.next;
        this.remove(entry);
        entry.expire();
        entry = next;
      }
      this.#rearm();
    });
  }

  /** Arms the timer for the earliest deadline left, unless one is armed for it already. */
  #rearm(): void {
    const head = this.#head;
    if (head === undefined || (this.#timer !== undefined && this.#timerAt <= head.deadline)) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#arm(head.deadline);
  }
}

/**
 * Runs embedded scripts: EVALSHA, and on NOSCRIPT (a restarted or flushed server) the same
 * call as EVAL, which also puts the script back in the server's cache.
 * @internal
 */
export class ScriptRunner {
  readonly #connection: RedisConnection;
  readonly #timeoutMs: number;
  readonly #timeouts = new TimeoutQueue();
  /**
   * Commands sent within a few milliseconds of each other share an AbortController: aborting
   * only affects commands not yet written out, and any such command of the slice is about to
   * time out as well.
   */
  #abort: AbortController | undefined;
  #abortUntil = 0;

  /** Whether the client is connected, as a timeout's message says. */
  get #connected(): boolean {
    return this.#connection.connected ?? this.#connection.sendsAtOnce;
  }

  /** Whether the user closed the client the runner sends through. */
  get connectionClosed(): boolean {
    return this.#connection.closed;
  }

  /** See {@link RedisConnection.noteServerVersion}. */
  noteServerVersion(version: string): void {
    this.#connection.noteServerVersion?.(version);
  }

  constructor(connection: RedisConnection, timeoutMs: number) {
    this.#connection = connection;
    this.#timeoutMs = timeoutMs;
  }

  run(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    timeoutMs = this.#timeoutMs,
  ): Promise<unknown> {
    const variant = this.#variant(script);
    const command = scriptCommand(variant, keys, args);
    return this.send(command, timeoutMs).catch((error: unknown) => {
      if (!isNoScript(error)) throw error;
      command[0] = 'EVAL';
      command[1] = variant.source;
      return this.send(command, timeoutMs);
    });
  }

  /** The script as this connection runs it: on a cluster with sharded pub/sub, its twin that publishes with SPUBLISH. */
  #variant(script: LuaScript): ScriptVariant {
    return script.sharded !== undefined && this.#connection.shardedPubSub === true ? script.sharded : script;
  }

  /**
   * One command with the command timeout (a library may wait forever once a command is
   * written); the reply in the form replies.ts describes.
   */
  send(args: string[], timeoutMs = this.#timeoutMs): Promise<unknown> {
    const now = performance.now();
    const abort = this.#abortFor(now, timeoutMs);
    return this.#settle(this.#connection.send(args, abort?.signal), now, timeoutMs, abort);
  }

  /**
   * A script call and a command written right behind it on the same connection, in one round
   * trip: the second (a `WAIT`) gets `thenTimeoutMs`. Resolves with the script's reply and the
   * second command's reply, or its failure as an Error (the script's outcome is known either
   * way); rejects when the script call fails.
   */
  async runThen(
    script: LuaScript,
    keys: readonly string[],
    args: readonly string[],
    then: string[],
    timeoutMs: number,
    thenTimeoutMs: number,
  ): Promise<{ readonly reply: unknown; readonly then: unknown }> {
    const variant = this.#variant(script);
    const command = scriptCommand(variant, keys, args);
    let [reply, after] = this.#sendPair(command, then, timeoutMs, thenTimeoutMs);
    let value: unknown;
    try {
      value = await reply;
    } catch (error) {
      if (!isNoScript(error)) throw error;
      // The WAIT behind a refused EVALSHA counted nothing new: both go again.
      command[0] = 'EVAL';
      command[1] = variant.source;
      [reply, after] = this.#sendPair(command, then, timeoutMs, thenTimeoutMs);
      value = await reply;
    }
    return { reply: value, then: await after };
  }

  /** Two commands back to back; the second's failure resolves as the Error (never unhandled). */
  #sendPair(
    first: string[],
    second: string[],
    timeoutMs: number,
    secondTimeoutMs: number,
  ): [Promise<unknown>, Promise<unknown>] {
    const now = performance.now();
    const abort = this.#abortFor(now, timeoutMs);
    const connection = this.#connection;
    const sent =
      connection.sendPair === undefined
        ? ([connection.send(first, abort?.signal), connection.send(second, abort?.signal)] as const)
        : connection.sendPair(first, second, abort?.signal);
    const reply = this.#settle(sent[0], now, timeoutMs, abort);
    // An unanswered second command must not abort a first one still queued with it.
    const after = this.#settle(sent[1], now, timeoutMs + secondTimeoutMs, undefined).catch(
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    );
    // The first's failure is the caller's to see; the second then has nothing to say.
    reply.catch(() => undefined);
    return [reply, after];
  }

  /**
   * The AbortController for a command sent now, if the connection needs one. Aborting takes a
   * command that was never written out of the library's queue, so a call given up while
   * disconnected cannot run later, after the caller has moved on. A ready client writes the
   * command out at once, so it needs none.
   */
  #abortFor(now: number, timeoutMs: number): AbortController | undefined {
    if (this.#connection.sendsAtOnce) return undefined;
    if (this.#abort === undefined || now >= this.#abortUntil || this.#abort.signal.aborted) {
      this.#abort = new AbortController();
      // Every command of the slice listens to it: no leak warning however many there are.
      setMaxListeners(0, this.#abort.signal);
      this.#abortUntil = now + Math.min(50, timeoutMs / 10);
    }
    return this.#abort;
  }

  /** A reply within `timeoutMs` of `now`, in the form replies.ts describes. */
  #settle(
    reply: Promise<unknown>,
    now: number,
    timeoutMs: number,
    abort: AbortController | undefined,
  ): Promise<unknown> {
    const timeouts = this.#timeouts;
    return new Promise((resolve, reject) => {
      let settled = false;
      const entry = timeouts.add(now + timeoutMs, () => {
        settled = true;
        abort?.abort();
        reject(new CommandTimeoutError(timeoutMs, this.#connected));
      });
      reply.then(
        (value) => {
          if (settled) return;
          settled = true;
          timeouts.remove(entry);
          resolve(plainReply(value));
        },
        (error: unknown) => {
          if (settled) return;
          settled = true;
          timeouts.remove(entry);
          // Withdrawn, unwritten, with a command of the same moment that timed out: say why.
          if (abort?.signal.aborted === true) {
            reject(new CommandTimeoutError(performance.now() - now, this.#connected));
            return;
          }
          if (!(error instanceof Error)) {
            reject(new Error(String(error)));
            return;
          }
          reject(isWithdrawn(error) ? new CommandNotSentError() : error);
        },
      );
    });
  }
}
