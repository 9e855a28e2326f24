// Bad input, generated: every public entry point that takes arguments rejects a bad name, time,
// option type or unknown option key with InvalidArgumentError, and nothing reaches Redis while
// thousands of such calls run. A dedicated server's INFO commandstats is compared before and
// after, so a single stray command from any connection would show.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  LockClient,
  MAX_NAME_LENGTH,
  MAX_PREFIX_LENGTH,
  MAX_TIME_MS,
  type Lease,
  type Lock,
  type LockHandle,
  type LockOptions,
} from '../../src/index.js';
import { startRedis, type RedisInstance } from '../support/redis-server.js';
import { testResources, type Redis } from '../support/resources.js';

/** At least this many generated cases per method, at CI size too: no case touches Redis. */
const RUNS = 1_000;

// ---- what Redis saw ----------------------------------------------------------------------

type Stats = ReadonlyMap<string, number>;

/** calls + rejected_calls + failed_calls per command, without INFO, which is how we ask. */
async function commandStats(admin: Redis): Promise<Stats> {
  const reply = await admin.sendCommand(['INFO', 'commandstats']);
  const text = Buffer.isBuffer(reply) ? reply.toString('utf8') : typeof reply === 'string' ? reply : '';
  const stats = new Map<string, number>();
  for (const line of text.split(/\r?\n/)) {
    const match = /^cmdstat_([^:]+):(.*)$/.exec(line);
    if (match === null) continue;
    const [, command = '', fields = ''] = match;
    if (command === 'info') continue;
    let total = 0;
    for (const pair of fields.split(',')) {
      const [field, value] = pair.split('=');
      if (field === 'calls' || field === 'rejected_calls' || field === 'failed_calls') total += Number(value);
    }
    stats.set(command, total);
  }
  return stats;
}

function difference(before: Stats, after: Stats): Record<string, number> {
  const changed: Record<string, number> = {};
  for (const [command, count] of after) {
    const delta = count - (before.get(command) ?? 0);
    if (delta !== 0) changed[command] = delta;
  }
  return changed;
}

// ---- generated values --------------------------------------------------------------------

/** Values of no type an option accepts as a number, a string or a boolean. */
const strangeValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.array(fc.anything(), { maxLength: 3 }),
  fc.object({ maxDepth: 1 }),
  fc.func(fc.anything()),
  fc.constantFrom(Symbol('latchkey'), Symbol.iterator),
  fc.bigInt(),
  fc.constant(new Date(0)),
  fc.constant(new AbortController().signal),
);

/** Anything an options parameter is not: a non-object, an array, a function, null. */
const notAnOptionsObject: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.array(fc.anything(), { maxLength: 3 }),
  fc.func(fc.anything()),
  fc.constantFrom(Symbol('options'), 0, 1, -1, Number.NaN, '', 'waitMs', true, false, 10n),
  fc.string(),
  fc.double(),
  fc.bigInt(),
  fc.boolean(),
);

/** Strings that are not a time, spelt like one or not. */
const timeAsString = fc.oneof(
  fc.constantFrom('', '0', '100', '1e3', 'Infinity', 'NaN', ' 5 '),
  fc.integer().map(String),
);

/** Never a whole number of milliseconds in [min, MAX_TIME_MS] (Infinity only when `infinityOk`). */
function badTime(min: number, infinityOk = false): fc.Arbitrary<unknown> {
  const numeric = fc
    .oneof(
      fc.constantFrom(
        min - 1,
        -1,
        -0,
        0,
        Number.NaN,
        Number.POSITIVE_INFINITY,
        Number.NEGATIVE_INFINITY,
        1.5,
        min + 0.5,
        MAX_TIME_MS + 1,
        2 ** 31,
        2 ** 53,
        2 ** 53 + 2,
        1e21,
        Number.MAX_VALUE,
        Number.MIN_VALUE,
        -Number.MAX_VALUE,
      ),
      fc.integer({ min: Number.MIN_SAFE_INTEGER, max: min - 1 }),
      fc.integer({ min: MAX_TIME_MS + 1, max: Number.MAX_SAFE_INTEGER }),
      fc.double(),
    )
    .filter(
      (value) =>
        !(Number.isInteger(value) && value >= min && value <= MAX_TIME_MS) &&
        !(infinityOk && value === Number.POSITIVE_INFINITY),
    );
  return fc.oneof(numeric, timeAsString, strangeValue, fc.boolean());
}

function goodTime(min: number): fc.Arbitrary<number> {
  return fc.oneof(fc.constantFrom(min, MAX_TIME_MS), fc.integer({ min, max: MAX_TIME_MS }));
}

/** Strings trim() removes entirely (the tab and line breaks are control characters too). */
const blank = fc
  .array(fc.constantFrom(' ', '\t', '\n', '\r', '\u00a0', '\u2003', '\u2028', '\u3000', '\ufeff'), {
    minLength: 0,
    maxLength: 8,
  })
  .map((parts) => parts.join(''));

const loneSurrogate = fc
  .tuple(
    fc.string({ maxLength: 5 }),
    fc.oneof(fc.integer({ min: 0xd800, max: 0xdbff }), fc.integer({ min: 0xdc00, max: 0xdfff })),
    fc.string({ maxLength: 5 }),
  )
  // A high surrogate right before a low one would pair up; keep the tail free of low ones.
  .map(([head, unit, tail]) => `${head.replace(/[\ud800-\udbff]$/, '')}${String.fromCharCode(unit)}x${tail}`);

const withControl = fc
  .tuple(fc.string({ maxLength: 5 }), fc.integer({ min: 0, max: 0x1f }), fc.string({ maxLength: 5 }))
  .map(([head, code, tail]) => `a${head}${String.fromCharCode(code)}${tail}`);

function tooLong(max: number): fc.Arbitrary<string> {
  return fc
    .tuple(fc.integer({ min: max + 1, max: max + 5_000 }), fc.constantFrom('a', 'é', '{', '😀'))
    .map(([length, unit]) => unit.repeat(length).slice(0, length).padEnd(length, 'z'));
}

/** Names that are invalid with an empty key prefix, whatever else is true of them. */
const badName: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom('', '{', '}', '{}', '}{', 'a{b', 'b}', '{a}{b}', '{{a}}', '{a}}', 'x{}y', '}a{'),
  blank,
  loneSurrogate,
  withControl,
  tooLong(MAX_NAME_LENGTH),
  strangeValue,
  fc.double(),
  fc.boolean(),
  fc.constant(undefined),
);

/** Names that are certainly valid: visible, well-formed, short, no braces or control characters. */
const goodName = fc
  .oneof(
    fc.string({ minLength: 1, maxLength: 60, unit: 'grapheme' }),
    fc.string({ minLength: 1, maxLength: 40 }),
    fc.constantFrom('invoice:42', '{tag}:1', 'a', 'ü', '😀'.repeat(512)),
  )
  .filter(
    (name) =>
      name.length <= MAX_NAME_LENGTH &&
      name.trim().length > 0 &&
      name.isWellFormed() &&
      !/[\u0000-\u001f\u007f]/.test(name) &&
      (!/[{}]/.test(name) || /^[^{}]*\{[^{}]+\}[^{}]*$/.test(name)),
  );

/** An option key that no method knows, including near misses of real ones. */
function unknownKey(known: readonly string[]): fc.Arbitrary<string> {
  return fc
    .oneof(
      fc.constantFrom(
        '__proto__',
        'constructor',
        'toString',
        'waitms',
        'WaitMs',
        'lease',
        'timeout',
        'watchdogTimeout',
        'prefix',
        'reentrant',
        'waitMs',
        'signal',
        'keyPrefix',
        '',
        ' ',
      ),
      fc.string({ maxLength: 12 }),
    )
    .filter((key) => !known.includes(key));
}

/**
 * An options object that must be rejected: valid fields around one bad field, or valid
 * fields plus a key nobody knows. Built with Object.fromEntries so `__proto__` is a real key.
 */
function badOptions(
  good: Record<string, fc.Arbitrary<unknown>>,
  bad: Record<string, fc.Arbitrary<unknown>>,
): fc.Arbitrary<unknown> {
  const known = Object.keys(good);
  const validPart = fc.record(good, { requiredKeys: [] });
  const oneBadField = fc
    .tuple(validPart, fc.constantFrom(...Object.keys(bad)))
    .chain(([valid, key]) =>
      (bad[key] ?? fc.constant(null)).map((value) =>
        Object.fromEntries([...Object.entries(valid), [key, value]]),
      ),
    );
  const extraKey = fc
    .tuple(validPart, unknownKey(known), fc.anything())
    .map(([valid, key, value]) => Object.fromEntries([...Object.entries(valid), [key, value]]));
  return fc.oneof(oneBadField, extraKey, notAnOptionsObject);
}

const goodClientOptions = {
  watchdogTimeoutMs: goodTime(30),
  keyPrefix: fc.constantFrom('', 'app:', 'lk-test-bad-input-', ' '),
  commandTimeoutMs: goodTime(1),
  subscriptionLingerMs: goodTime(0),
};
const badClientOptions = badOptions(goodClientOptions, {
  watchdogTimeoutMs: badTime(30),
  keyPrefix: fc.oneof(
    loneSurrogate,
    withControl,
    tooLong(MAX_PREFIX_LENGTH),
    strangeValue,
    fc.double(),
    fc.boolean(),
  ),
  commandTimeoutMs: badTime(1),
  subscriptionLingerMs: badTime(0),
});

const goodLockOptions = { reentrant: fc.boolean() };
const badLockOptions = badOptions(goodLockOptions, {
  reentrant: fc.oneof(strangeValue, fc.constantFrom(0, 1, 'true', 'false', ''), fc.double()),
});

const goodAcquireOptions = {
  waitMs: fc.oneof(goodTime(0), fc.constant(Number.POSITIVE_INFINITY)),
  leaseMs: goodTime(1),
  signal: fc.constant(new AbortController().signal),
};
const fakeSignal = fc.oneof(
  fc.constant({ aborted: false, reason: undefined, addEventListener: () => {}, throwIfAborted: () => {} }),
  fc.constant(new EventTarget()),
  fc.constant(new AbortController()),
  fc.constant(null),
  fc.constantFrom('signal', 0, true),
  strangeValue.filter((value) => !(value instanceof AbortSignal)),
);
const badAcquireOptions = badOptions(goodAcquireOptions, {
  waitMs: badTime(0, true),
  leaseMs: badTime(1),
  signal: fakeSignal,
});

/** Callbacks withLock cannot run. */
const notAFunction: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, undefined, 0, '', 'fn', true, 1n, Symbol('fn')),
  fc.object({ maxDepth: 1 }),
  fc.array(fc.anything(), { maxLength: 2 }),
  fc.constant(Promise.resolve()),
);

// ---- checks ------------------------------------------------------------------------------

function expectThrowsInvalid(call: () => unknown): void {
  let thrown: unknown;
  try {
    call();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(InvalidArgumentError);
  expect(thrown).toMatchObject({ code: 'INVALID_ARGUMENT', name: 'InvalidArgumentError' });
}

/** The call returns (never throws) a promise that rejects with InvalidArgumentError. */
async function expectRejectsInvalid(call: () => Promise<unknown>): Promise<void> {
  let promise: Promise<unknown> | undefined;
  let thrown: unknown;
  try {
    promise = call();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeUndefined();
  expect(promise).toBeInstanceOf(Promise);
  const outcome = await (promise ?? Promise.resolve()).then(
    (value: unknown) => ({ resolved: value }),
    (error: unknown) => ({ rejected: error }),
  );
  expect(outcome).toHaveProperty('rejected');
  expect((outcome as { rejected?: unknown }).rejected).toBeInstanceOf(InvalidArgumentError);
}

const params = { numRuns: RUNS };

/** A handle of any kind. */
type AnyLock = LockHandle<Lease>;

describe('bad input is rejected before any Redis command', () => {
  let server: RedisInstance;
  const res = testResources(() => server.url);
  let admin: Redis;
  let redis: Redis;
  let locks: LockClient;
  let lock: Lock;
  let before: Stats;
  const created: LockClient[] = [];

  beforeAll(async () => {
    server = await startRedis();
    admin = await res.connect();
    redis = await res.connect();
    locks = res.track(new LockClient(redis, { keyPrefix: '' }));
    lock = locks.lock('bad-input');
    before = await commandStats(admin);
  });

  afterAll(async () => {
    await Promise.all(created.map((client) => client.close()));
    await res.closeAll();
    // Unset when beforeAll could not start a server; its own error says why.
    await server?.stop();
  });

  it('new LockClient(redis, options): a non-client or bad options throw at once', () => {
    const notAClient: fc.Arbitrary<unknown> = fc.oneof(
      strangeValue,
      fc.constantFrom(undefined, 0, 'redis://127.0.0.1:6379', true),
      fc.constant({ sendCommand: () => Promise.resolve(null) }),
      fc.constant({ duplicate: () => null }),
      fc.constant({ sendCommand: 'yes', duplicate: () => null }),
      // Shaped like a cluster client, but without what latchkey needs of one (sSubscribe).
      fc.constant({
        sendCommand: () => Promise.resolve(null),
        duplicate: () => null,
        nodeClient: () => null,
      }),
    );
    fc.assert(
      fc.property(notAClient, fc.record(goodClientOptions, { requiredKeys: [] }), (candidate, options) => {
        expectThrowsInvalid(() => new LockClient(candidate as Redis, options));
      }),
      params,
    );
    fc.assert(
      fc.property(badClientOptions, (options) => {
        expectThrowsInvalid(() => new LockClient(redis, options as never));
      }),
      params,
    );
    // The valid ones really are accepted, so the rejections above are about the bad part.
    fc.assert(
      fc.property(fc.record(goodClientOptions, { requiredKeys: [] }), (options) => {
        created.push(new LockClient(redis, options));
      }),
      { numRuns: 200 },
    );
  });

  // Every kind's factory checks names and options the same way.
  const factories = [
    ['lock', (name: string, options?: LockOptions) => locks.lock(name, options)],
    ['fencedLock', (name: string, options?: LockOptions) => locks.fencedLock(name, options)],
  ] as const;

  for (const [factory, make] of factories) {
    it(`locks.${factory}(name, options): bad names and bad options throw at once`, () => {
      fc.assert(
        fc.property(
          badName,
          fc.option(fc.record(goodLockOptions, { requiredKeys: [] }), { nil: undefined }),
          (name, options) => {
            expectThrowsInvalid(() => make(name as string, options));
          },
        ),
        params,
      );
      fc.assert(
        fc.property(goodName, badLockOptions, (name, options) => {
          expectThrowsInvalid(() => make(name, options as never));
        }),
        params,
      );
      fc.assert(
        fc.property(
          goodName,
          fc.option(fc.record(goodLockOptions, { requiredKeys: [] }), { nil: undefined }),
          (name, options) => {
            expect(make(name, options).name).toBe(name);
          },
        ),
        params,
      );
    });
  }

  it('locks.simpleLock(name): bad names throw at once', () => {
    fc.assert(
      fc.property(badName, (name) => {
        expectThrowsInvalid(() => locks.simpleLock(name as string));
      }),
      params,
    );
    fc.assert(
      fc.property(goodName, (name) => {
        expect(locks.simpleLock(name).name).toBe(name);
      }),
      params,
    );
  });

  it('the braces rule holds for every kind', () => {
    // The braces rule is about the whole key: a prefix's brace pairs up with the name's.
    const braced = new LockClient(redis, { keyPrefix: 'tenant{' });
    created.push(braced);
    expectThrowsInvalid(() => braced.lock('x'));
    expectThrowsInvalid(() => braced.fencedLock('x'));
    expectThrowsInvalid(() => braced.simpleLock('x'));
    expect(braced.lock('7}:invoice').key).toBe('tenant{7}:invoice');
    expect(braced.simpleLock('7}:invoice').key).toBe('tenant{7}:invoice');
  });

  for (const [method, call] of [
    ['acquire', (target: AnyLock, options: unknown) => target.acquire(options as never)],
    ['tryAcquire', (target: AnyLock, options: unknown) => target.tryAcquire(options as never)],
    [
      'withLock',
      (target: AnyLock, options: unknown) =>
        target.withLock(() => expect.unreachable('fn ran'), options as never),
    ],
  ] as const) {
    it(`<every kind>.${method}(options): bad options reject with InvalidArgumentError`, async () => {
      const targets: AnyLock[] = [
        lock,
        locks.lock('bad-input-strict', { reentrant: false }),
        locks.fencedLock('bad-input-fenced'),
        locks.simpleLock('bad-input-simple'),
      ];
      await fc.assert(
        fc.asyncProperty(badAcquireOptions, fc.constantFrom(...targets), async (options, target) => {
          await expectRejectsInvalid(() => call(target, options));
        }),
        params,
      );
    });
  }

  it('lock.withLock(fn, options): a callback that is not a function rejects, and is never called', async () => {
    await fc.assert(
      fc.asyncProperty(
        notAFunction,
        fc.option(fc.record(goodAcquireOptions, { requiredKeys: [] }), { nil: undefined }),
        async (fn, options) => {
          await expectRejectsInvalid(() => lock.withLock(fn as () => void, options));
        },
      ),
      params,
    );
  });

  it('sent not one command to Redis for all of the above', async () => {
    const after = await commandStats(admin);
    expect(difference(before, after)).toEqual({});
  });

  it('the count would have seen a command: a valid tryAcquire shows up in it', async () => {
    const start = await commandStats(admin);
    const lease: Lease | null = await lock.tryAcquire({ waitMs: 0 });
    const changed = difference(start, await commandStats(admin));
    expect(lease).not.toBeNull();
    expect((changed['evalsha'] ?? 0) + (changed['eval'] ?? 0)).toBeGreaterThanOrEqual(1);
    await lease?.release();
  });
});
