/**
 * The client library the LockClients under test run on. The integration suite runs once per
 * library from the same files: LATCHKEY_TEST_CLIENT=ioredis, iovalkey or glide gives every
 * LockClient (and every worker process, which inherits the variable) a connection of that
 * library; unset or `node-redis`, a node-redis one. The tests' own commands (inspecting keys, CLIENT KILL, ...) stay on node-redis
 * connections of their own, whatever the library under test.
 */
import { GlideClient } from '@valkey/valkey-glide';
import { Redis as IoRedis } from 'ioredis';
import { Redis as IoValkey } from 'iovalkey';
import { createClient } from 'redis';
import { flatMaps } from '../../src/redis/glide-replies.js';

export type TestClientLibrary = 'node-redis' | 'ioredis' | 'iovalkey' | 'glide';

const LIBRARIES: readonly TestClientLibrary[] = ['node-redis', 'ioredis', 'iovalkey', 'glide'];

function libraryFromEnv(): TestClientLibrary {
  const value = process.env['LATCHKEY_TEST_CLIENT'];
  if (value === undefined || value === '') return 'node-redis';
  const library = LIBRARIES.find((known) => known === value);
  if (library !== undefined) return library;
  throw new Error(
    `LATCHKEY_TEST_CLIENT must be one of ${LIBRARIES.join(', ')}, got ${JSON.stringify(value)}`,
  );
}

/**
 * GLIDE's own bound on each command (its `requestTimeout`), set above LockClient's default
 * commandTimeoutMs (5 s) as latchkey's docs advise: GLIDE's default of 250 ms fails commands of
 * a busy test machine that latchkey would still wait for.
 */
export const GLIDE_REQUEST_TIMEOUT_MS = 10_000;

/** The library of the LockClients under test. */
export const TEST_CLIENT: TestClientLibrary = libraryFromEnv();

/** What a test needs of the library under test that not every library can do. */
export type Needs = 'subscriber-on-replica' | 'subscriber-errors' | 'cluster';

/**
 * The one place that says which tests do not apply to which library, and why; a test that
 * needs one of these skips with `it.skipIf(cannot('…'))`.
 */
const CANNOT: Readonly<Record<TestClientLibrary, Partial<Record<Needs, string>>>> = {
  'node-redis': {},
  ioredis: { cluster: "latchkey refuses ioredis's Cluster client (Redis.Cluster)" },
  iovalkey: { cluster: "latchkey refuses iovalkey's Cluster client" },
  glide: {
    'subscriber-on-replica':
      "GLIDE's standalone client connects to a primary only (it checks the node's role), so its subscriber cannot be made to sit on a replica",
    'subscriber-errors':
      'GLIDE reports no connection error of a client: a waiter whose only connection in use is its subscriber cannot see Redis go away before its own next call',
  },
};

/** Why the library under test cannot do what `need` names, or undefined when it can. */
export function cannot(need: Needs): string | undefined {
  return CANNOT[TEST_CLIENT][need];
}

function newNodeRedis(options: { url: string; name?: string }) {
  return createClient(options);
}

/** The type of a node-redis client createClient({ url }) returns. */
export type NodeRedis = ReturnType<typeof newNodeRedis>;

/** A connection a LockClient under test runs on: node-redis, ioredis, iovalkey or GLIDE. */
export type LockConnection = NodeRedis | IoRedis | IoValkey | GlideClient;

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
  if (library === 'glide') return connectGlide(options);
  const settings = {
    lazyConnect: true,
    ...(options.name === undefined ? {} : { connectionName: options.name }),
  };
  const client =
    library === 'iovalkey' ? new IoValkey(options.url, settings) : new IoRedis(options.url, settings);
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** A GLIDE standalone client to `options.url` (host, port, and the user and password in it). */
export async function connectGlide(options: ClientOptions): Promise<GlideClient> {
  const url = new URL(options.url);
  const password = decodeURIComponent(url.password);
  return GlideClient.createClient({
    addresses: [{ host: url.hostname, port: Number(url.port || 6379) }],
    requestTimeout: GLIDE_REQUEST_TIMEOUT_MS,
    ...(password === ''
      ? {}
      : { credentials: { username: decodeURIComponent(url.username) || 'default', password } }),
    ...(options.name === undefined ? {} : { clientName: options.name }),
  });
}

/** Whether `client` is ioredis or iovalkey (its fork, with the same API). */
export function isIoRedis(client: LockConnection): client is IoRedis | IoValkey {
  return client instanceof IoRedis || client instanceof IoValkey;
}

export function isGlide(client: LockConnection): client is GlideClient {
  return client instanceof GlideClient;
}

/** Plain commands on `client`, whichever its library: replies as node-redis gives them over RESP2. */
export interface Commands {
  sendCommand(args: string[]): Promise<unknown>;
}

export function commandsOf(client: LockConnection): Commands {
  if (isGlide(client)) {
    return { sendCommand: async (args: string[]) => flatMaps(await client.customCommand(args)) };
  }
  if (!isIoRedis(client)) return client;
  return {
    sendCommand: ([name, ...args]: string[]) => client.call(name ?? '', ...args),
  };
}

/** Closes `client` at once, without waiting for replies. */
export function destroyClient(client: LockConnection): void {
  if (isGlide(client)) client.close();
  else if (isIoRedis(client)) client.disconnect();
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
  if (isGlide(connection)) {
    const customCommand = (args: string[]): Promise<unknown> => {
      const held = before(args);
      if (held === undefined) return connection.customCommand(args);
      return held.then(() => connection.customCommand(args));
    };
    return methodsProxy(client, 'customCommand', customCommand);
  }
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
  return methodsProxy(client, 'sendCommand', sendCommand);
}

/** `client` with `name` replaced by `method`; its other methods run on the client itself. */
function methodsProxy<C extends LockConnection>(client: C, name: string, method: unknown): C {
  return new Proxy(client, {
    get(target, property) {
      if (property === name) return method;
      const value: unknown = Reflect.get(target, property, target);
      // Methods run on the client itself, whose private fields a proxy lacks; the class stays
      // as it is (a GLIDE subscriber is made by its static createClient).
      if (property === 'constructor') return value;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
