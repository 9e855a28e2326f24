/**
 * The `abortSignal` of one command handed to a ready node-redis client. Of an AbortSignal,
 * node-redis's command queue reads `aborted`, adds one `abort` listener when it queues the
 * command, and removes it when it takes the command out to write it, or drops it (node-redis 5
 * and 6): so a command whose listener is still on was not written. That is all this is; a real
 * AbortController would cost an EventTarget per command, several microseconds and a few
 * hundred bytes on every call latchkey sends, for a signal that is almost never aborted.
 */
class Withdrawal {
  aborted = false;
  #listener: (() => void) | undefined;
  readonly #unwritten: Set<Withdrawal>;

  constructor(unwritten: Set<Withdrawal>) {
    this.#unwritten = unwritten;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    this.#listener = listener;
    this.#unwritten.add(this);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    if (this.#listener !== listener) return;
    this.#listener = undefined;
    this.#unwritten.delete(this);
  }

  /**
   * The command was settled without its listener taken off (node-redis's own command timeout
   * rejects it so): it is out of node-redis's queue, and must never be taken out again.
   */
  forget(): void {
    this.#listener = undefined;
    this.#unwritten.delete(this);
  }

  /** Takes the command out of node-redis's queue, which rejects it with its AbortError. */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listener = this.#listener;
    this.#listener = undefined;
    this.#unwritten.delete(this);
    listener?.();
  }
}

/**
 * Commands handed to a ready node-redis client that it has not written out yet, so that none
 * is written to a connection that is already gone.
 *
 * node-redis queues a command and writes the queue from a `setImmediate`. node-redis 5 writes
 * it even when the connection was reset in between (the event loop polls sockets before it
 * runs immediates): the command goes to the dead socket and stays among those awaiting a
 * reply, so the new connection's first reply (its handshake's `CLIENT SETINFO`: an error
 * before Redis 7.2, `OK` after) is taken for that command's, and every later reply on the
 * connection for the command before it. node-redis emits `reconnecting` while it handles the
 * reset, before that write. Then latchkey's unwritten commands are withdrawn, and commands
 * sent before that write has run are held back until it has (a command queued meanwhile would
 * go to the dead socket with it): nothing of latchkey's goes astray. A withdrawn command never
 * reached Redis and is retried like any call that found the connection down.
 *
 * Withdrawn newest first: node-redis 5 unlinks a queue's head without clearing the next
 * node's back pointer, and taking head after head out of its queue can lose every command
 * queued afterwards.
 * @internal
 */
export class UnwrittenCommands {
  /** The commands handed over and not yet taken out to be written, oldest first. */
  readonly #unwritten = new Set<Withdrawal>();

  /**
   * Set from a reset until the writes node-redis scheduled before it have run: an immediate
   * queued after them.
   */
  #draining: Promise<void> | undefined;

  /** Resolves once a command may be handed to the client; undefined when it may be now. */
  get draining(): Promise<void> | undefined {
    return this.#draining;
  }

  /** How many commands handed over are not written yet. */
  get size(): number {
    return this.#unwritten.size;
  }

  /**
   * On a reset: withdraws every command not written yet (node-redis rejects each with its
   * AbortError) and holds new ones back until the writes scheduled before it have run.
   */
  readonly withdraw = (): void => {
    const withdrawals = [...this.#unwritten];
    for (let i = withdrawals.length - 1; i >= 0; i -= 1) withdrawals[i]?.abort();
    this.#draining ??= new Promise((resolve) => {
      setImmediate(() => {
        this.#draining = undefined;
        resolve();
      });
    });
  };

  /** Hands `args` to the ready `client` now, withdrawable until node-redis writes it out. */
  send(client: CommandSender, args: string[]): Promise<unknown> {
    const withdrawal = new Withdrawal(this.#unwritten);
    const reply = client.sendCommand(args, { abortSignal: withdrawal as unknown as AbortSignal });
    // A command written out had its listener taken off by node-redis; one settled otherwise (a
    // rejection: node-redis's own timeout, say) must be forgotten here, as it is out of the queue.
    reply.catch(() => withdrawal.forget());
    return reply;
  }
}

/** What {@link UnwrittenCommands.send} needs of a node-redis client. */
interface CommandSender {
  sendCommand(args: string[], options: { abortSignal: AbortSignal }): Promise<unknown>;
}

/** A node-redis client's event that says a ready connection was lost and is being replaced. */
interface Reconnecting {
  on(event: 'reconnecting', listener: () => void): unknown;
}

const byClient = new WeakMap<object, UnwrittenCommands>();

/**
 * The unwritten commands of `client`, shared by every LockClient on it (one `reconnecting`
 * listener per client, for as long as the client lives); undefined when the client has no
 * events to listen to (a wrapper), which then sends as it is.
 * @internal
 */
export function unwrittenCommandsOf(client: object): UnwrittenCommands | undefined {
  let unwritten = byClient.get(client);
  if (unwritten !== undefined) return unwritten;
  if (typeof (client as Partial<Reconnecting>).on !== 'function') return undefined;
  unwritten = new UnwrittenCommands();
  (client as Reconnecting).on('reconnecting', unwritten.withdraw);
  byClient.set(client, unwritten);
  return unwritten;
}
