// The write policy of a synchronizer's writes that are not holds, against a fake engine (no
// Redis): a fresh request key beside the synchronizer's key for each recorded call, the retry
// window and the record's TTL worked out from the command timeout, a repeatable write sent as it
// is, each reply read through its call (what it means reaches `done` and the caller; a reply the
// script never gives is a REDIS_ERROR), and a replica shortfall of a write that gives reported on
// `error`, not thrown.
import { describe, expect, it } from 'vitest';
import { LockError, ReplicationError } from '../../../src/errors.js';
import type { Synced } from '../../../src/engine/calls.js';
import type { Engine } from '../../../src/engine/engine.js';
import { ScriptCall } from '../../../src/engine/script-call.js';
import { Writes, type RecordedCall } from '../../../src/engine/writes.js';
import { LATCH_PROTOCOL, type CountedDown } from '../../../src/primitives/count-down-latch/protocol.js';
import { addCall, deleteCall, drainCall, trySetCall } from '../../../src/primitives/semaphore/protocol.js';

const KEY = 'coupons';
/** A recorded write's script: the synchronizer's key and the request key. */
const RECORDED = { name: 'semaphore/release', numberOfKeys: 2 } as ScriptCall['script'];
/** A repeatable write's script: the synchronizer's key alone. */
const REPEATABLE = { name: 'count-down-latch/delete', numberOfKeys: 1 } as ScriptCall['script'];
/** The fake scripts answer 1 (given) or 0 (nothing changed), and nothing else. */
const given = (reply: unknown): boolean | undefined => (reply === 1 ? true : reply === 0 ? false : undefined);

interface Sent {
  readonly call: ScriptCall;
  readonly doing: string;
  readonly until: number | undefined;
}

/** The part of the engine Writes uses, recording what it is asked. */
class FakeEngine {
  readonly sent: Sent[] = [];
  readonly reported: Error[] = [];
  readonly shortfalls: { acknowledged: number; done: string }[] = [];
  #requests = 0;
  constructor(
    readonly commandTimeoutMs: number,
    readonly replies: { reply: unknown; acknowledged: number } | Error = {
      reply: 1,
      acknowledged: Number.POSITIVE_INFINITY,
    },
    /** Replicas `syncReplicas` asks for; 0: off. */
    readonly required = 0,
  ) {}
  requestKey(key: string): string {
    this.#requests += 1;
    return `latchkey_request:{${key}}:${this.#requests}`;
  }
  syncedCall(call: ScriptCall, doing: string, until?: number): Promise<Synced> {
    this.sent.push({ call, doing, until });
    const replies = this.replies;
    return replies instanceof Error ? Promise.reject(replies) : Promise.resolve(replies);
  }
  shortfall(acknowledged: number, done: string): ReplicationError | undefined {
    this.shortfalls.push({ acknowledged, done });
    if (acknowledged >= this.required) return undefined;
    return new ReplicationError(`${done} but too few replicas acknowledged it`, acknowledged, this.required);
  }
  reportError(error: Error): void {
    this.reported.push(error);
  }
}

function writes(engine: FakeEngine): Writes {
  return new Writes(engine as unknown as Engine, KEY);
}

/** A recorded call that carries its request key and record TTL as its arguments. */
function recordedCall(requestKey: string, recordTtlMs: number): ScriptCall<boolean> {
  return new ScriptCall(RECORDED, [KEY, requestKey], ['1', String(recordTtlMs)], given);
}

const done = (released: boolean): string | false => released && 'Semaphore "coupons" was released';

describe('Writes', () => {
  it('retries for twice the command timeout, within 1 s and 8 s', () => {
    expect(writes(new FakeEngine(100)).retryMs).toBe(1_000);
    expect(writes(new FakeEngine(500)).retryMs).toBe(1_000);
    expect(writes(new FakeEngine(501)).retryMs).toBe(1_002);
    expect(writes(new FakeEngine(2_000)).retryMs).toBe(4_000);
    expect(writes(new FakeEngine(4_000)).retryMs).toBe(8_000);
    expect(writes(new FakeEngine(30_000)).retryMs).toBe(8_000);
  });

  it('keeps a record past every copy of its call: the retry window, two command timeouts and 2 s', () => {
    expect(writes(new FakeEngine(100)).recordTtlMs).toBe(1_000 + 200 + 2_000);
    expect(writes(new FakeEngine(2_000)).recordTtlMs).toBe(4_000 + 4_000 + 2_000);
    expect(writes(new FakeEngine(30_000)).recordTtlMs).toBe(8_000 + 60_000 + 2_000);
  });

  it('makes a fresh request key beside the synchronizer key for each call', () => {
    const write = writes(new FakeEngine(1_000));
    const first = write.requestKey();
    const second = write.requestKey();
    expect(first).toContain(`{${KEY}}`);
    expect(second).toContain(`{${KEY}}`);
    expect(first).not.toBe(second);
  });

  it('sends a recorded write with a fresh request key and the record TTL, retried for the retry window', async () => {
    const engine = new FakeEngine(2_000, { reply: 1, acknowledged: 2 });
    const write = writes(engine);
    const before = performance.now();
    await expect(write.recorded(recordedCall, 'releasing semaphore "coupons"')).resolves.toEqual({
      value: true,
      acknowledged: 2,
    });
    const after = performance.now();
    await write.recorded(recordedCall, 'releasing semaphore "coupons"');
    const [first, second] = engine.sent as [Sent, Sent];
    expect(first.doing).toBe('releasing semaphore "coupons"');
    expect(first.call.args).toEqual(['1', String(10_000)]);
    expect(first.until).toBeGreaterThanOrEqual(before + 4_000);
    expect(first.until).toBeLessThanOrEqual(after + 4_000);
    // Each call its own request key: a second call is not taken for a copy of the first.
    expect(first.call.keys[1]).not.toBe(second.call.keys[1]);
  });

  it('sends a recorded write again under the request key it is given', async () => {
    const engine = new FakeEngine(1_000);
    const write = writes(engine);
    const requestKey = write.requestKey();
    await write.recorded(recordedCall, 'counting down latch "warm-up"', requestKey);
    await write.recorded(recordedCall, 'counting down latch "warm-up"', requestKey);
    expect(engine.sent.map((sent) => sent.call.keys[1])).toEqual([requestKey, requestKey]);
  });

  it('resolves a giving write that too few replicas acknowledged, and reports the shortfall on `error`', async () => {
    const engine = new FakeEngine(1_000, { reply: 1, acknowledged: 1 }, 2);
    await expect(writes(engine).giving(recordedCall, 'releasing semaphore "coupons"', done)).resolves.toBe(
      true,
    );
    expect(engine.shortfalls).toEqual([{ acknowledged: 1, done: 'Semaphore "coupons" was released' }]);
    expect(engine.reported).toHaveLength(1);
    expect(engine.reported[0]).toBeInstanceOf(ReplicationError);
    expect(engine.reported[0]?.message).toMatch(/^Semaphore "coupons" was released but/);
  });

  it('reports nothing for a giving write enough replicas acknowledged, or one that changed nothing', async () => {
    const enough = new FakeEngine(1_000, { reply: 1, acknowledged: 2 }, 2);
    await writes(enough).giving(recordedCall, 'releasing semaphore "coupons"', done);
    expect(enough.reported).toEqual([]);

    const unchanged = new FakeEngine(1_000, { reply: 0, acknowledged: 0 }, 2);
    await expect(writes(unchanged).giving(recordedCall, 'releasing semaphore "coupons"', done)).resolves.toBe(
      false,
    );
    // Nothing was given: there is no shortfall to ask about.
    expect(unchanged.shortfalls).toEqual([]);
    expect(unchanged.reported).toEqual([]);
  });

  it('rejects a write Redis failed, and reports nothing', async () => {
    const engine = new FakeEngine(1_000, new Error('Redis failed while releasing semaphore "coupons"'), 2);
    await expect(writes(engine).giving(recordedCall, 'releasing semaphore "coupons"', done)).rejects.toThrow(
      'Redis failed while releasing semaphore "coupons"',
    );
    expect(engine.reported).toEqual([]);
  });

  it('sends a repeatable write as it is, with no request key and no retry window, and reports its shortfall', async () => {
    const engine = new FakeEngine(1_000, { reply: 1, acknowledged: 0 }, 1);
    const call = new ScriptCall(REPEATABLE, [KEY], [], given);
    await expect(writes(engine).repeatable(call, 'deleting latch "warm-up"', done)).resolves.toBe(true);
    expect(engine.sent).toEqual([{ call, doing: 'deleting latch "warm-up"', until: undefined }]);
    expect(engine.reported).toHaveLength(1);
  });
});

describe("Writes of a semaphore and a latch, read through their protocols' calls", () => {
  const semaphore = { name: 'coupons', key: KEY, channel: `redisson_sc:{${KEY}}`, initial: '' };
  const latch = { key: KEY, channel: `redisson_countdownlatch__channel__{${KEY}}` };
  const countDown: RecordedCall<CountedDown> = (requestKey, recordTtlMs) =>
    LATCH_PROTOCOL.countDown(latch, requestKey, recordTtlMs);

  it('hands what a reply means to `done` and to the caller', async () => {
    const seen: CountedDown[] = [];
    const countedDown = (value: CountedDown): string | false => {
      seen.push(value);
      return value.counted && 'Latch "warm-up" was counted down';
    };
    // One replica required, none acknowledged: a count-down that counted is reported, by its value.
    const counting = new FakeEngine(1_000, { reply: 2, acknowledged: 0 }, 1);
    await expect(
      writes(counting).giving(countDown, 'counting down latch "warm-up"', countedDown),
    ).resolves.toEqual({ count: 2, counted: true });
    expect(counting.reported).toHaveLength(1);
    // No latch: the script answers -1, which is a count of 0 that counted nothing.
    const missing = new FakeEngine(1_000, { reply: -1, acknowledged: 0 }, 1);
    await expect(
      writes(missing).giving(countDown, 'counting down latch "warm-up"', countedDown),
    ).resolves.toEqual({ count: 0, counted: false });
    expect(missing.shortfalls).toEqual([]);
    expect(seen).toEqual([
      { count: 2, counted: true },
      { count: 0, counted: false },
    ]);

    const sets: boolean[] = [];
    for (const reply of [1, 0]) {
      const engine = new FakeEngine(1_000, { reply, acknowledged: Number.POSITIVE_INFINITY });
      await writes(engine).giving(
        (requestKey, recordTtlMs) => trySetCall(semaphore, requestKey, 5, recordTtlMs),
        'setting the permits of semaphore "coupons"',
        (set) => {
          sets.push(set);
          return set && 'The permits of semaphore "coupons" were set';
        },
      );
    }
    expect(sets).toEqual([true, false]);

    const added = new FakeEngine(1_000, { reply: -3, acknowledged: 2 });
    await expect(
      writes(added).giving(
        (requestKey, recordTtlMs) => addCall(semaphore, requestKey, -5, recordTtlMs),
        'adding permits to semaphore "coupons"',
        (count) => `Semaphore "coupons" now has ${count} permits`,
      ),
    ).resolves.toBe(-3);
    const drained = new FakeEngine(1_000, { reply: 4, acknowledged: 1 });
    await expect(
      writes(drained).recorded(
        (requestKey, recordTtlMs) => drainCall(semaphore, requestKey, recordTtlMs),
        'draining the permits of semaphore "coupons"',
      ),
    ).resolves.toEqual({ value: 4, acknowledged: 1 });
    const deleted = new FakeEngine(1_000, { reply: 1, acknowledged: Number.POSITIVE_INFINITY });
    await expect(
      writes(deleted).repeatable(
        LATCH_PROTOCOL.delete(latch),
        'deleting latch "warm-up"',
        (gone) => gone && 'gone',
      ),
    ).resolves.toBe(true);
  });

  it.each([
    ['semaphore/add', 'a string', 'lots'],
    ['semaphore/try-set', 'the number 2', 2],
    ['semaphore/drain', 'nil', null],
    ['count-down-latch/count-down', 'nil', null],
    ['count-down-latch/try-set-count', 'an array of 2', [1, 0]],
    ['semaphore/delete', 'a string', 'OK'],
    ['count-down-latch/delete', 'the number 5', 5],
  ])(
    'rejects a reply %s never gives (%s) as REDIS_ERROR, before `done` and any report',
    async (script, shape, reply) => {
      // Too few replicas as well: a write whose reply means nothing reports no shortfall.
      const engine = new FakeEngine(1_000, { reply, acknowledged: 0 }, 1);
      const write = writes(engine);
      const asked: unknown[] = [];
      const ask = (value: unknown): string => {
        asked.push(value);
        return 'written';
      };
      const sending: Record<string, () => Promise<unknown>> = {
        'semaphore/add': () => write.giving((key, ttl) => addCall(semaphore, key, 1, ttl), 'releasing', ask),
        'semaphore/try-set': () =>
          write.giving((key, ttl) => trySetCall(semaphore, key, 3, ttl), 'setting', ask),
        'semaphore/drain': () => write.recorded((key, ttl) => drainCall(semaphore, key, ttl), 'draining'),
        'count-down-latch/count-down': () => write.giving(countDown, 'counting down', ask),
        'count-down-latch/try-set-count': () =>
          write.giving((key, ttl) => LATCH_PROTOCOL.trySetCount(latch, key, 3, 0, ttl), 'setting', ask),
        'semaphore/delete': () => write.repeatable(deleteCall(semaphore), 'deleting', ask),
        'count-down-latch/delete': () => write.repeatable(LATCH_PROTOCOL.delete(latch), 'deleting', ask),
      };
      const error = await sending[script]?.().then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(engine.sent.map((sent) => sent.call.script.name)).toEqual([script]);
      expect(error).toBeInstanceOf(LockError);
      expect((error as LockError).code).toBe('REDIS_ERROR');
      expect((error as LockError).message).toBe(
        `Unexpected reply from Redis to script "${script}": ${shape}`,
      );
      expect(asked).toEqual([]);
      expect(engine.shortfalls).toEqual([]);
      expect(engine.reported).toEqual([]);
    },
  );
});
