import { createClient, RESP_TYPES } from 'redis';
import type { LockRedisClient } from '../index.js';
import { CliError, ExitCode } from './exit-codes.js';

/**
 * Reconnection attempts after a connection fails or drops before the command gives up: an
 * operator wants a clear "unreachable" at once, not a tool that retries in silence.
 */
const MAX_RECONNECTS = 2;
const FIRST_RECONNECT_DELAY_MS = 100;

/** The URL without its password, for messages. @internal */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = '';
    return parsed.toString();
  } catch {
    return '(unreadable URL)';
  }
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return messageOf(error.errors[0]);
  if (error instanceof Error) return error.message === '' ? error.name : error.message;
  return String(error);
}

function newClient(url: string, timeoutMs: number) {
  return createClient({
    url,
    // Replies as RESP2 arrays on node-redis 5 and 6 alike, which is what the readers expect.
    RESP: 2,
    socket: {
      connectTimeout: timeoutMs,
      reconnectStrategy: (retries: number, cause: Error) =>
        retries >= MAX_RECONNECTS ? cause : FIRST_RECONNECT_DELAY_MS * 2 ** retries,
    },
  });
}

type NodeRedisClient = ReturnType<typeof newClient>;

/** node-redis throws when destroying a client that already closed itself (it gave up). */
function destroyQuietly(client: NodeRedisClient): void {
  try {
    client.destroy();
  } catch {
    // Closed already.
  }
}

/** A node-redis connection whose failures end the command with {@link ExitCode.REDIS}. @internal */
export class Connection {
  readonly #client: NodeRedisClient;
  readonly #url: string;
  readonly #timeoutMs: number;
  readonly #subscribers: NodeRedisClient[] = [];
  /** The first connection error node-redis reported: later ones only say the socket closed. */
  #firstError: unknown;

  private constructor(client: NodeRedisClient, url: string, timeoutMs: number) {
    this.#client = client;
    this.#url = url;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Connects to `url`, trying at most {@link MAX_RECONNECTS} more times.
   * @throws {@link CliError} ({@link ExitCode.REDIS}) naming the URL without its password.
   */
  static async open(url: string, timeoutMs: number): Promise<Connection> {
    const client = newClient(url, timeoutMs);
    const connection = new Connection(client, url, timeoutMs);
    await connection.#connect(client);
    return connection;
  }

  /** The client to hand to a LockClient. */
  get lockRedis(): LockRedisClient {
    return this.#client;
  }

  /** One command; its raw RESP2 reply. */
  send(args: readonly string[]): Promise<unknown> {
    return this.#limit(this.#client.sendCommand([...args]), args[0] ?? 'a command');
  }

  /**
   * Commands in one MULTI/EXEC: their replies, read at one instant. A command that failed
   * inside the transaction (WRONGTYPE, say) has an `Error` as its reply. Bulk strings arrive as
   * Buffers: a permit id is 16 raw bytes, which text would not keep apart.
   */
  transaction(commands: readonly (readonly string[])[]): Promise<unknown[]> {
    const multi = this.#client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer }).multi();
    for (const args of commands) multi.addCommand([...args]);
    const replies = multi.exec().then(
      (values) => values as unknown[],
      (error: unknown) => {
        // node-redis rejects the whole EXEC when one command failed, with every reply attached.
        const replies = (error as { replies?: unknown } | null)?.replies;
        if (Array.isArray(replies) && replies.length === commands.length) return replies as unknown[];
        throw error;
      },
    );
    return this.#limit(replies, 'MULTI');
  }

  /**
   * Subscribes to `channels` on a second connection and calls `onMessage` for each message.
   * The connection is closed by {@link Connection.close}.
   */
  async subscribe(channels: readonly string[], onMessage: () => void): Promise<void> {
    const subscriber = this.#client.duplicate();
    this.#subscribers.push(subscriber);
    await this.#connect(subscriber);
    await this.#limit(subscriber.subscribe([...channels], onMessage), 'SUBSCRIBE');
  }

  /** Wraps a failure of Redis in the CLI's error, naming the URL without its password. */
  failure(error: unknown, doing: string): CliError {
    if (error instanceof CliError) return error;
    return new CliError(
      ExitCode.REDIS,
      `Redis at ${redactUrl(this.#url)} failed while ${doing}: ${messageOf(error)}`,
      {
        cause: error,
      },
    );
  }

  /** Closes every connection; never throws. */
  async close(): Promise<void> {
    await Promise.all(
      [this.#client, ...this.#subscribers].map(async (client) => {
        try {
          if (client.isOpen) await client.close();
        } catch {
          destroyQuietly(client);
        }
      }),
    );
  }

  async #connect(client: NodeRedisClient): Promise<void> {
    client.on('error', (error: unknown) => {
      this.#firstError ??= error;
    });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.#timeoutMs);
    });
    let reason: string | undefined;
    try {
      const outcome = await Promise.race([client.connect(), timedOut]);
      if (outcome === 'timeout') reason = `no answer within ${this.#timeoutMs} ms`;
    } catch (error) {
      reason = messageOf(this.#firstError ?? error);
    } finally {
      clearTimeout(timer);
    }
    if (reason !== undefined) {
      destroyQuietly(client);
      throw new CliError(ExitCode.REDIS, `Cannot reach Redis at ${redactUrl(this.#url)}: ${reason}`);
    }
  }

  /** Rejects with a {@link CliError} when `promise` takes longer than the time limit. */
  #limit<T>(promise: Promise<T>, doing: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new CliError(
            ExitCode.REDIS,
            `Redis at ${redactUrl(this.#url)} did not answer ${doing} within ${this.#timeoutMs} ms`,
          ),
        );
      }, this.#timeoutMs);
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(this.failure(error, doing));
        },
      );
    });
  }
}
