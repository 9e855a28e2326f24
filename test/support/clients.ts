/**
 * The client library the LockClients under test run on. The integration suite runs once per
 * library from the same files: LATCHKEY_TEST_CLIENT=ioredis gives every LockClient (and every
 * worker process, which inherits the variable) an ioredis connection; unset or `node-redis`, a
 * node-redis one. The tests' own commands (inspecting keys, CLIENT KILL, ...) stay on node-redis
 * connections of their own, whatever the library under test.
 */
import { Redis as IoRedis } from 'ioredis';
import { createClient } from 'redis';

export type TestClientLibrary = 'node-redis' | 'ioredis';

function libraryFromEnv(): TestClientLibrary {
  const value = process.env['LATCHKEY_TEST_CLIENT'];
  if (value === undefined || value === '' || value === 'node-redis') return 'node-redis';
  if (value === 'ioredis') return 'ioredis';
  throw new Error(`LATCHKEY_TEST_CLIENT must be node-redis or ioredis, got ${JSON.stringify(value)}`);
}

/** The library of the LockClients under test. */
export const TEST_CLIENT: TestClientLibrary = libraryFromEnv();

function newNodeRedis(options: { url: string; name?: string }) {
  return createClient(options);
}

/** The type of a node-redis client createClient({ url }) returns. */
export type NodeRedis = ReturnType<typeof newNodeRedis>;

/** A connection a LockClient under test runs on: node-redis or ioredis. */
export type LockConnection = NodeRedis | IoRedis;

export interface ClientOptions {
  readonly url: string;
  /** CLIENT SETNAME for the connection (and the subscriber latchkey opens from it). */
  readonly name?: string;
}

/** A connected node-redis client whose 'error' events are ignored (the tests assert instead). */
export async function connectNodeRedis(options: ClientOptions): Promise<NodeRedis> {
  const client = newNodeRedis({
    url: options.url,
    ...(options.name === undefined ? {} : { name: options.name }),
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** A connected client of `library` (default: the one under test), 'error' events ignored. */
export async function connectClient(
  options: ClientOptions,
  library: TestClientLibrary = TEST_CLIENT,
): Promise<LockConnection> {
  if (library === 'node-redis') return connectNodeRedis(options);
  const client = new IoRedis(options.url, {
    lazyConnect: true,
    ...(options.name === undefined ? {} : { connectionName: options.name }),
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

export function isIoRedis(client: LockConnection): client is IoRedis {
  return client instanceof IoRedis;
}

/** Plain commands on `client`, whichever its library: replies as node-redis gives them over RESP2. */
export interface Commands {
  sendCommand(args: string[]): Promise<unknown>;
}

export function commandsOf(client: LockConnection): Commands {
  if (!isIoRedis(client)) return client;
  return {
    sendCommand: ([name, ...args]: string[]) => client.call(name ?? '', ...args),
  };
}

/** Closes `client` at once, without waiting for replies. */
export function destroyClient(client: LockConnection): void {
  if (isIoRedis(client)) client.disconnect();
  else client.destroy();
}

/** Runs before a command goes to the library; the command waits for the promise it returns. */
export type CommandHook = (args: readonly string[]) => Promise<void> | void;

/**
 * `client` as a LockClient sees it, with `before` told of each command before it is handed to
 * the library, and able to hold it back. Everything else is the client itself.
 */
export function interceptCommands<C extends LockConnection>(client: C, before: CommandHook): C {
  const connection: LockConnection = client;
  const sendCommand = isIoRedis(connection)
    ? (command: { name: string; args: unknown[]; promise: Promise<unknown> }): Promise<unknown> => {
        const held = before([command.name, ...command.args.map(String)]);
        if (held === undefined) return connection.sendCommand(command as never) as Promise<unknown>;
        void held.then(() => connection.sendCommand(command as never));
        return command.promise;
      }
    : (args: string[], options?: unknown): Promise<unknown> => {
        const held = before(args);
        if (held === undefined) return connection.sendCommand(args, options as never);
        return held.then(() => connection.sendCommand(args, options as never));
      };
  return new Proxy(client, {
    get(target, property) {
      if (property === 'sendCommand') return sendCommand;
      const value: unknown = Reflect.get(target, property, target);
      // Methods run on the client itself, whose private fields a proxy lacks.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
