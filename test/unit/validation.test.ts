// Bad input is rejected before anything reaches Redis. A real server is used only to prove
// that: MONITOR shows no command from the client's connection while all of it runs.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  InvalidArgumentError,
  LockClient,
  LockError,
  LockLostError,
  LockNotOwnedError,
  LockReentryError,
  LockTimeoutError,
  MAX_NAME_LENGTH,
  MAX_PREFIX_LENGTH,
  MAX_TIME_MS,
  type AcquireOptions,
  type Lock,
  type LockClientOptions,
  type LockOptions,
  type LockRedisClient,
} from '../../src/index.js';
import { commandsDuring, type WatchedConnection } from '../support/commands-during.js';
import { uniquePrefix } from '../support/keys.js';
import { clientAddr, commandsFrom, type CommandMonitor } from '../support/monitor.js';
import { sharedRedis } from '../support/redis-server.js';
import { commandsOf } from '../support/clients.js';
import { testResources, type LockConnection, type Redis } from '../support/resources.js';
import { sleep } from '../support/wait.js';

/** A bad value, its description, and what the message must mention (the option, what arrived). */
type Case = readonly [label: string, value: unknown, mentions: readonly string[]];

function expectInvalid(error: unknown, mentions: readonly string[]): void {
  expect(error).toBeInstanceOf(InvalidArgumentError);
  expect(error).toBeInstanceOf(LockError);
  const { name, code, message } = error as InvalidArgumentError;
  expect(name).toBe('InvalidArgumentError');
  expect(code).toBe('INVALID_ARGUMENT');
  for (const mention of mentions) expect(message).toContain(mention);
}

/** The error `call` throws synchronously. */
function thrownBy(call: () => unknown): unknown {
  try {
    call();
  } catch (error) {
    return error;
  }
  throw new Error('expected a synchronous throw, but the call returned');
}

/** The rejection of the promise `call` returns; `call` itself must not throw. */
async function rejectionOf(call: () => Promise<unknown>): Promise<unknown> {
  let promise: Promise<unknown> | undefined;
  expect(() => {
    promise = call();
  }).not.toThrow();
  expect(promise).toBeInstanceOf(Promise);
  return (promise ?? Promise.resolve()).then(
    () => {
      throw new Error('expected a rejected promise, but it resolved');
    },
    (error: unknown) => error,
  );
}

const quoted = (text: string): string => JSON.stringify(text);

const BAD_NAMES: readonly Case[] = [
  ['empty', '', ['`name`', '"" (string of length 0)']],
  ['spaces only', '   ', ['`name`', 'visible character', 'string of length 3']],
  ['Unicode white space only', '\u00a0\u2003', ['`name`', 'visible character', 'string of length 2']],
  ['a number', 42, ['`name`', 'string', '`42` (number)']],
  ['null', null, ['`name`', 'string', '`null`']],
  ['undefined', undefined, ['`name`', 'string', '`undefined`']],
  ['an object', { name: 'invoice:42' }, ['`name`', 'string', 'a value of type object']],
  [
    'one character over MAX_NAME_LENGTH',
    'n'.repeat(MAX_NAME_LENGTH + 1),
    ['`name`', String(MAX_NAME_LENGTH), `string of length ${MAX_NAME_LENGTH + 1}`],
  ],
  ['a lone high surrogate', '\uD800', ['`name`', 'surrogate', quoted('\uD800')]],
  ['a lone low surrogate inside text', 'order\uDC00:1', ['`name`', 'surrogate', quoted('order\uDC00:1')]],
  ['a NUL character', 'a\u0000b', ['`name`', 'control', quoted('a\u0000b')]],
  ['a newline', 'invoice\n42', ['`name`', 'control', quoted('invoice\n42')]],
  ['a tab', 'invoice\t42', ['`name`', 'control', quoted('invoice\t42')]],
  ['a DEL character', 'invoice\u007f', ['`name`', 'control', 'string of length 8']],
  ['an unclosed brace', 'a{b', ['`name`', 'a{b"', 'hash tag']],
  ['an unopened brace', 'a}b', ['`name`', 'a}b"', 'hash tag']],
  ['an empty hash tag', '{}', ['`name`', '{}"', 'empty']],
  ['braces the wrong way round', '}a{', ['`name`', '}a{"', 'hash tag']],
  ['two hash tags', '{a}{b}', ['`name`', '{a}{b}"', 'hash tag']],
];

/** Whole-millisecond durations that are not: NaN, negative, fractional, infinite, strings. */
function badDurations(option: string, below: number): Case[] {
  const values: ReadonlyArray<readonly [what: string, value: unknown, shown: string]> = [
    ['NaN', Number.NaN, '`NaN` (number)'],
    ['negative', -1, '`-1` (number)'],
    ['fractional', 1.5, '`1.5` (number)'],
    ['Infinity', Number.POSITIVE_INFINITY, '`Infinity` (number)'],
    ['-Infinity', Number.NEGATIVE_INFINITY, '`-Infinity` (number)'],
    ['below its minimum', below, `\`${below}\` (number)`],
    ['above MAX_TIME_MS', MAX_TIME_MS + 1, `\`${MAX_TIME_MS + 1}\` (number)`],
    ['a numeric string', '1000', '"1000" (string of length 4)'],
  ];
  return values.map(([what, value, shown]) => [
    `${option} ${what}`,
    { [option]: value },
    [`\`${option}\``, shown],
  ]);
}

/** Turns cases into rows for `it.each` with `$label` in the title. */
const rows = (
  cases: readonly Case[],
): Array<{ label: string; value: unknown; mentions: readonly string[] }> =>
  cases.map(([label, value, mentions]) => ({ label, value, mentions }));

const BAD_CLIENT_OPTIONS: readonly Case[] = [
  ...badDurations('watchdogTimeoutMs', 29),
  ...badDurations('commandTimeoutMs', 0),
  [
    'subscriptionLingerMs negative',
    { subscriptionLingerMs: -1 },
    ['`subscriptionLingerMs`', '`-1` (number)'],
  ],
  ['keyPrefix a number', { keyPrefix: 7 }, ['`keyPrefix`', '`7` (number)']],
  ['telemetry a string', { telemetry: 'on' }, ['`telemetry`', 'boolean', '"on" (string of length 2)']],
  [
    'keyPrefix too long',
    { keyPrefix: 'p'.repeat(MAX_PREFIX_LENGTH + 1) },
    ['`keyPrefix`', String(MAX_PREFIX_LENGTH), `string of length ${MAX_PREFIX_LENGTH + 1}`],
  ],
  ['keyPrefix with a control character', { keyPrefix: 'billing\u0000' }, ['`keyPrefix`', 'control']],
  [
    'an unknown option',
    { watchdogTimeout: 1_000 },
    ['`watchdogTimeout`', 'Unknown option', '`watchdogTimeoutMs`'],
  ],
  ['a misspelt option', { keyprefix: 'billing:' }, ['`keyprefix`', 'Unknown option']],
  ['options a string', 'fast', ['`options`', '"fast" (string of length 4)']],
  ['options null', null, ['`options`', '`null`']],
  ['options an array', [], ['`options`', 'an array']],
];

const BAD_CLIENTS: readonly Case[] = [
  ['an empty object', {}, ['`redis`', 'node-redis client', 'a value of type object']],
  ['null', null, ['`redis`', '`null`']],
  ['undefined', undefined, ['`redis`', '`undefined`']],
  ['a URL string', 'redis://127.0.0.1:6379', ['`redis`', '"redis://127.0.0.1:6379"']],
  [
    'an object with sendCommand only',
    { sendCommand: () => Promise.resolve() },
    ['`redis`', 'a value of type object'],
  ],
];

const BAD_LOCK_OPTIONS: readonly Case[] = [
  ['reentrant a string', { reentrant: 'yes' }, ['`reentrant`', 'boolean', '"yes" (string of length 3)']],
  ['reentrant a number', { reentrant: 0 }, ['`reentrant`', 'boolean', '`0` (number)']],
  ['reentrant null', { reentrant: null }, ['`reentrant`', 'boolean', '`null`']],
  ['an unknown option', { reentrent: false }, ['`reentrent`', 'Unknown option', '`reentrant`']],
  ['options a string', 'strict', ['`options`', '"strict" (string of length 6)']],
];

const BAD_ACQUIRE_OPTIONS: readonly Case[] = [
  ['waitMs -1', { waitMs: -1 }, ['`waitMs`', '`-1` (number)']],
  ['waitMs NaN', { waitMs: Number.NaN }, ['`waitMs`', '`NaN` (number)']],
  ['waitMs 1.5', { waitMs: 1.5 }, ['`waitMs`', '`1.5` (number)']],
  ["waitMs '10'", { waitMs: '10' }, ['`waitMs`', '"10" (string of length 2)']],
  ['waitMs -Infinity', { waitMs: Number.NEGATIVE_INFINITY }, ['`waitMs`', '`-Infinity` (number)']],
  ['waitMs above MAX_TIME_MS', { waitMs: MAX_TIME_MS + 1 }, ['`waitMs`', `\`${MAX_TIME_MS + 1}\` (number)`]],
  ...badDurations('leaseMs', 0),
  [
    'signal a plain object',
    { signal: { aborted: false } },
    ['`signal`', 'AbortSignal', 'a value of type object'],
  ],
  ['signal a string', { signal: 'abort' }, ['`signal`', 'AbortSignal', '"abort" (string of length 5)']],
  [
    'signal an AbortController',
    { signal: new AbortController() },
    ['`signal`', 'AbortSignal', 'a value of type object'],
  ],
  ['signal null', { signal: null }, ['`signal`', 'AbortSignal', '`null`']],
  ['an unknown option', { timeoutMs: 100 }, ['`timeoutMs`', 'Unknown option', '`waitMs`']],
  ['options a number', 5, ['`options`', '`5` (number)']],
  ['options null', null, ['`options`', '`null`']],
  ['options an array', [100], ['`options`', 'an array']],
];

const BAD_CALLBACKS: readonly Case[] = [
  ['a string', 'release afterwards', ['`fn`', 'function', '"release afterwards"']],
  ['null', null, ['`fn`', 'function', '`null`']],
  ['undefined', undefined, ['`fn`', 'function', '`undefined`']],
  ['an object', { run: () => undefined }, ['`fn`', 'function', 'a value of type object']],
  ['a number', 42, ['`fn`', 'function', '`42` (number)']],
];

describe('validation: bad input is rejected before any Redis command', () => {
  let url: string;
  let redis: LockConnection;
  /** For CLIENT LIST and the lock-stealing in the owner-token test; never monitored. */
  let stats: Redis;
  const connectionName = `lk-validation-${randomBytes(4).toString('hex')}`;
  let addr: string;
  let monitor: CommandMonitor;
  /** `redis`, its address and `monitor`: what commandsDuring() counts on. */
  let watched: WatchedConnection;
  const perFile = testResources(() => url);
  const res = testResources(() => url);

  function lockClient(options: LockClientOptions = {}): LockClient {
    return res.track(new LockClient(redis, { keyPrefix: uniquePrefix('validation'), ...options }));
  }

  /** Connections named as ours: a subscriber opened by `duplicate()` carries the same name. */
  async function ourConnections(): Promise<number> {
    return (await stats.clientList()).filter((client) => client.name === connectionName).length;
  }

  /** Runs `action` and asserts that `redis`'s connection sent nothing meanwhile (ECHO markers bracket it). */
  async function expectNoCommands(action: () => Promise<void>): Promise<void> {
    const connectionsBefore = await ourConnections();
    expect(await commandsDuring(watched, action)).toEqual([]);
    // Nor was a subscriber connection opened.
    expect(await ourConnections()).toBe(connectionsBefore);
  }

  beforeAll(async () => {
    ({ url } = await sharedRedis());
    redis = await perFile.connectLocks({ name: connectionName });
    stats = await perFile.connect();
    addr = await clientAddr(commandsOf(redis));
    monitor = await perFile.monitor();
    watched = { redis: commandsOf(redis), addr, monitor };
  });

  afterEach(() => res.closeAll());

  afterAll(() => perFile.closeAll());

  it('the monitor sees commands of the client connection (the zero counts below can fail)', async () => {
    const marker = randomBytes(6).toString('hex');
    await commandsOf(redis).sendCommand(['ECHO', marker]);
    await commandsOf(redis).sendCommand(['EXISTS', `${uniquePrefix('validation')}probe`]);
    await commandsOf(redis).sendCommand(['ECHO', `${marker}:end`]);
    await monitor.waitFor(() =>
      commandsFrom(monitor.lines, { clientAddr: addr }).some((command) => command[1] === `${marker}:end`),
    );
    const all = commandsFrom(monitor.lines, { clientAddr: addr });
    const start = all.findIndex((command) => command[1] === marker);
    expect(all.slice(start + 1, start + 2).map((command) => command[0]?.toUpperCase())).toEqual(['EXISTS']);
    expect(await ourConnections()).toBe(1);
  });

  it.each(rows(BAD_CLIENTS))(
    'new LockClient() throws synchronously for a client that is $label',
    async ({ value, mentions }) => {
      await expectNoCommands(async () => {
        expectInvalid(
          thrownBy(() => new LockClient(value as LockRedisClient)),
          mentions,
        );
        await Promise.resolve();
      });
    },
  );

  it.each(rows(BAD_CLIENT_OPTIONS))(
    'new LockClient() throws synchronously for $label',
    async ({ value, mentions }) => {
      await expectNoCommands(async () => {
        expectInvalid(
          thrownBy(() => new LockClient(redis, value as LockClientOptions)),
          mentions,
        );
        await Promise.resolve();
      });
    },
  );

  it('new LockClient() accepts the limits next to the rejected values, without sending anything', async () => {
    await expectNoCommands(async () => {
      const edge = new LockClient(redis, {
        watchdogTimeoutMs: 30,
        commandTimeoutMs: 1,
        subscriptionLingerMs: 0,
        keyPrefix: 'p'.repeat(MAX_PREFIX_LENGTH),
        telemetry: false,
      });
      expect(edge.lock('invoice:42').key).toBe(`${'p'.repeat(MAX_PREFIX_LENGTH)}invoice:42`);
      await edge.close();
    });
  });

  it.each(rows(BAD_NAMES))(
    'lock() throws synchronously for a name that is $label',
    async ({ value, mentions }) => {
      const locks = lockClient();
      await expectNoCommands(async () => {
        expectInvalid(
          thrownBy(() => locks.lock(value as string)),
          mentions,
        );
        await Promise.resolve();
      });
    },
  );

  it('lock() accepts the edge cases next to the rejected names, without sending anything', async () => {
    const locks = lockClient();
    await expectNoCommands(async () => {
      expect(locks.lock('n'.repeat(MAX_NAME_LENGTH)).name).toHaveLength(MAX_NAME_LENGTH);
      expect(locks.lock('{orders}:7').name).toBe('{orders}:7');
      expect(locks.lock('счёт:42 🧾').name).toBe('счёт:42 🧾');
      expect(locks.lock(' invoice ').name).toBe(' invoice ');
      await Promise.resolve();
    });
  });

  it.each(rows(BAD_LOCK_OPTIONS))(
    'lock() throws synchronously for lock options with $label',
    async ({ value, mentions }) => {
      const locks = lockClient();
      await expectNoCommands(async () => {
        expectInvalid(
          thrownBy(() => locks.lock('invoice:42', value as LockOptions)),
          mentions,
        );
        await Promise.resolve();
      });
    },
  );

  describe.each([
    { method: 'acquire', call: (lock: Lock, options: unknown) => lock.acquire(options as AcquireOptions) },
    {
      method: 'tryAcquire',
      call: (lock: Lock, options: unknown) => lock.tryAcquire(options as AcquireOptions),
    },
    {
      method: 'withLock',
      call: (lock: Lock, options: unknown) => lock.withLock(() => 'ran', options as AcquireOptions),
    },
  ])('$method()', ({ call }) => {
    it.each(rows(BAD_ACQUIRE_OPTIONS))(
      'returns a rejected promise for $label',
      async ({ value, mentions }) => {
        const lock = lockClient().lock('invoice:42');
        await expectNoCommands(async () => {
          expectInvalid(await rejectionOf(() => call(lock, value)), mentions);
        });
      },
    );
  });

  it('withLock() returns a rejected promise for a callback that is not a function, and for bad options never runs it', async () => {
    const lock = lockClient().lock('invoice:42');
    await expectNoCommands(async () => {
      for (const [, value, mentions] of BAD_CALLBACKS) {
        const error = await rejectionOf(() => lock.withLock(value as () => void));
        expectInvalid(error, mentions);
      }
      let ran = false;
      const error = await rejectionOf(() =>
        lock.withLock(
          () => {
            ran = true;
          },
          { waitMs: -1 },
        ),
      );
      expectInvalid(error, ['`waitMs`']);
      expect(ran).toBe(false);
    });
  });

  it('never puts the owner token (hash field) or the client id in an error message', async () => {
    const locks = lockClient({ watchdogTimeoutMs: 300 });
    const lost: LockLostError[] = [];
    locks.on('lockLost', (event) => lost.push(event.error));
    const lock = locks.lock('invoice:42');
    const secrets = new Set<string>();
    const texts: string[] = [];

    const remember = async (): Promise<void> => {
      for (const field of Object.keys(await stats.hGetAll(lock.key))) {
        secrets.add(field);
        secrets.add(field.split(':')[0] ?? field);
      }
    };
    const collect = (error: unknown): void => {
      let current: unknown = error;
      while (current instanceof Error) {
        texts.push(current.message, String(current), current.stack ?? '');
        current = current.cause;
      }
    };
    const untilAborted = async (signal: AbortSignal): Promise<void> => {
      const deadline = performance.now() + 5_000;
      while (!signal.aborted && performance.now() < deadline) {
        await sleep(20);
      }
      expect(signal.aborted).toBe(true);
    };

    // LockTimeoutError: a second top-level owner gives up.
    const lease = await lock.acquire();
    await remember();
    const timeout = await lock.acquire({ waitMs: 50 }).catch((e: unknown) => e);
    expect(timeout).toBeInstanceOf(LockTimeoutError);
    collect(timeout);

    // LockLostError: the hash is deleted behind the holder's back; the watchdog notices.
    await stats.del(lock.key);
    await untilAborted(lease.signal);
    expect(lease.signal.reason).toBeInstanceOf(LockLostError);
    collect(lease.signal.reason);
    // LockNotOwnedError: releasing the lost lease.
    const afterLoss = await lease.release().catch((e: unknown) => e);
    expect(afterLoss).toBeInstanceOf(LockNotOwnedError);
    collect(afterLoss);

    // LockNotOwnedError from Redis itself: a fixed lease (no watchdog) whose hash was deleted.
    const fixed = await lock.acquire({ leaseMs: 10_000 });
    await remember();
    await stats.del(lock.key);
    const notOwner = await fixed.release().catch((e: unknown) => e);
    expect(notOwner).toBeInstanceOf(LockNotOwnedError);
    collect(notOwner);

    // LockNotOwnedError: a lease released twice.
    const twice = await lock.acquire();
    await remember();
    await twice.release();
    const again = await twice.release().catch((e: unknown) => e);
    expect(again).toBeInstanceOf(LockNotOwnedError);
    collect(again);

    // LockLostError out of withLock: the lock is lost while the callback runs.
    const fromWithLock = await lock
      .withLock(async (held) => {
        await remember();
        await stats.del(lock.key);
        await untilAborted(held.signal);
      })
      .catch((e: unknown) => e);
    expect(fromWithLock).toBeInstanceOf(LockLostError);
    collect(fromWithLock);

    // LockReentryError from a non-reentrant lock.
    const strict = locks.lock('report:daily', { reentrant: false });
    const reentry = await strict
      .withLock(async () => {
        for (const field of Object.keys(await stats.hGetAll(strict.key))) secrets.add(field);
        return strict.acquire();
      })
      .catch((e: unknown) => e);
    expect(reentry).toBeInstanceOf(LockReentryError);
    collect(reentry);

    for (const error of lost) collect(error);
    expect(lost.length).toBeGreaterThanOrEqual(2);
    // Four distinct owners of one client, plus the client id.
    expect(secrets.size).toBeGreaterThanOrEqual(5);
    expect(texts.length).toBeGreaterThan(0);
    for (const text of texts) {
      for (const secret of secrets) {
        // Not `toContain`: a failure must not print the token either.
        expect(text.includes(secret), `error text #${texts.indexOf(text)} includes an owner token`).toBe(
          false,
        );
      }
    }
  });
});
