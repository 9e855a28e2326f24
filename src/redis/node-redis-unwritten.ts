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
  /** Commands handed over since the last sweep, and those of the sweep before. */
  #current: AbortController[] = [];
  #previous: AbortController[] = [];
  #sweepScheduled = false;
  /**
   * Runs once per turn of immediates while commands are kept. node-redis writes a command in
   * the first turn of immediates after it was handed over: by the second sweep after that,
   * it is written (aborting it then does nothing) or was withdrawn.
   */
  readonly #sweep = (): void => {
    this.#previous = this.#current;
    this.#current = [];
    this.#sweepScheduled = this.#previous.length > 0;
    if (this.#sweepScheduled) setImmediate(this.#sweep).unref();
  };

  /**
   * Set from a reset until the writes node-redis scheduled before it have run: an immediate
   * queued after them.
   */
  #draining: Promise<void> | undefined;

  /** Resolves once a command may be handed to the client; undefined when it may be now. */
  get draining(): Promise<void> | undefined {
    return this.#draining;
  }

  /**
   * On a reset: withdraws every command not written yet (node-redis rejects each with its
   * AbortError) and holds new ones back until the writes scheduled before it have run.
   */
  readonly withdraw = (): void => {
    const kept = [this.#previous, this.#current];
    this.#previous = [];
    this.#current = [];
    for (let k = kept.length - 1; k >= 0; k -= 1) {
      const controllers = kept[k] ?? [];
      for (let i = controllers.length - 1; i >= 0; i -= 1) controllers[i]?.abort();
    }
    this.#draining ??= new Promise((resolve) => {
      setImmediate(() => {
        this.#draining = undefined;
        resolve();
      });
    });
  };

  /** The signal for a command handed to the ready client now. */
  signal(): AbortSignal {
    const controller = new AbortController();
    this.#current.push(controller);
    if (!this.#sweepScheduled) {
      this.#sweepScheduled = true;
      setImmediate(this.#sweep).unref();
    }
    return controller.signal;
  }
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
