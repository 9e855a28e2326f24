// The release of a hold, against fake calls, a fake watchdog and a fake registry (no Redis), on
// vitest's fake clock: what each reply says (counted down, freed, not held, changed behind its
// back, unreadable), retries while the lock is known to be held, a last release Redis never
// confirmed, and a release too few replicas acknowledged.
import { EventEmitter } from 'eventemitter3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  LockError,
  LockLostError,
  LockNotOwnedError,
  ReplicationError,
  type LockLostReason,
} from '../../../../src/errors.js';
import type { Calls, Synced } from '../../../../src/engine/calls.js';
import { OperationChains } from '../../../../src/engine/chains.js';
import { Events } from '../../../../src/engine/events.js';
import { Hold } from '../../../../src/engine/holds/hold.js';
import { Releases, type ReleasedHolds } from '../../../../src/engine/holds/release.js';
import type { Watchdog } from '../../../../src/engine/holds/watchdog.js';
import { NO_TELEMETRY } from '../../../../src/engine/telemetry.js';
import { ScriptCall } from '../../../../src/engine/script-call.js';
import type { HeldLock, Protocol, ReleaseOutcome } from '../../../../src/engine/types.js';
import type { LockClientEvents, ReleasedEvent } from '../../../../src/options.js';

const LEASE_MS = 3_000;
const RELEASE_RETRY_MS = 2_000;
const OUTCOMES = new Set<unknown>(['partial', 'freed', 'absent', 'changed']);

const RELEASE = { name: 'release', numberOfKeys: 1 } as ScriptCall['script'];
/** The fake replies name the outcome the real reader would give; any other is one it never gives. */
const releaseOutcome = (reply: unknown): ReleaseOutcome | undefined =>
  OUTCOMES.has(reply) ? (reply as ReleaseOutcome) : undefined;

const protocol = {
  release: (hold: HeldLock, expected: number): ScriptCall<ReleaseOutcome> =>
    new ScriptCall(RELEASE, [hold.key], [String(expected)], releaseOutcome),
} as unknown as Protocol;

/** A reply, a failure, or an answer the test gives later. */
type Answer = unknown;

/** The part of Calls a release uses: each try takes the next answer (an Error fails it). */
class FakeCalls {
  readonly timeoutMs = 1_000;
  replication: { count: number; timeoutMs: number } | undefined;
  acknowledged = Number.POSITIVE_INFINITY;
  readonly sent: string[][] = [];
  /** The retry under way: what it asks before each try. */
  keepTrying: (() => boolean) | undefined;
  constructor(readonly answers: Answer[]) {}

  #next(call: ScriptCall): Promise<unknown> {
    this.sent.push([...call.args]);
    const answer = this.answers.shift();
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  }
  /** One try: its raw reply, and the replicas that acknowledged it. */
  once(call: ScriptCall): Promise<Synced> {
    return this.#next(call).then((reply) => ({ reply, acknowledged: this.acknowledged }));
  }
  /** Tries again while `keepTrying` says so and answers are left; then fails with the last error. */
  async retry(error: unknown, call: ScriptCall, keepTrying: (attempt: number) => boolean): Promise<Synced> {
    this.keepTrying = () => keepTrying(1);
    let last = error;
    for (let attempt = 1; this.answers.length > 0 && keepTrying(attempt); attempt += 1) {
      try {
        return { reply: await this.#next(call), acknowledged: this.acknowledged };
      } catch (failure) {
        last = failure;
      }
    }
    throw last;
  }
}

interface Setup {
  readonly releases: Releases;
  readonly hold: Hold;
  readonly calls: FakeCalls;
  readonly watchdog: { tracked: string[]; untracked: string[] };
  readonly forgotten: string[];
  readonly lost: LockLostReason[];
  readonly released: ReleasedEvent[];
  readonly errors: Error[];
}

function setup(answers: Answer[], count = 1): Setup {
  const calls = new FakeCalls(answers);
  const watchdog = { tracked: [] as string[], untracked: [] as string[] };
  const fakeWatchdog = {
    track: (hold: Hold) => watchdog.tracked.push(hold.name),
    untrack: (hold: Hold) => watchdog.untracked.push(hold.name),
  } as unknown as Watchdog;
  const emitter = new EventEmitter<LockClientEvents>();
  const released: ReleasedEvent[] = [];
  const errors: Error[] = [];
  emitter.on('released', (event) => released.push(event));
  emitter.on('error', (error) => errors.push(error));
  const forgotten: string[] = [];
  const lost: LockLostReason[] = [];
  const holds: ReleasedHolds = {
    forget: (hold) => forgotten.push(hold.name),
    markLost: (hold, reason, message) => {
      lost.push(reason);
      const error = new LockLostError(message, reason);
      hold.lose(error);
      return error;
    },
  };
  const releases = new Releases(
    {
      calls: calls as unknown as Calls,
      chains: new OperationChains(),
      events: new Events(emitter),
      watchdog: fakeWatchdog,
      telemetry: NO_TELEMETRY,
      releaseRetryMs: RELEASE_RETRY_MS,
    },
    holds,
  );
  const hold = new Hold(
    { name: 'orders', key: 'orders', channel: 'unlock:orders', protocol },
    'field',
    LEASE_MS,
    true,
  );
  hold.count = count;
  hold.extend(performance.now());
  return { releases, hold, calls, watchdog, forgotten, lost, released, errors };
}

describe('Releases', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('counts a re-entered hold down, sets its lease again from the send, and keeps it renewed', async () => {
    const { releases, hold, calls, watchdog, forgotten, released } = setup(['partial'], 2);
    vi.advanceTimersByTime(500);
    const sentAt = performance.now();
    await releases.release(hold);
    expect(calls.sent).toEqual([['2']]);
    expect(hold.count).toBe(1);
    expect(hold.validUntil).toBe(sentAt + LEASE_MS);
    expect(watchdog).toEqual({ tracked: ['orders'], untracked: [] });
    expect(forgotten).toEqual([]);
    expect(released).toEqual([{ name: 'orders', key: 'orders', holdCount: 1 }]);
    expect(hold.releasing).toBe(0);
  });

  it('stops renewal of the last hold before the call goes out, and forgets the hold once freed', async () => {
    const { releases, hold, calls, watchdog, forgotten, released } = setup(['freed']);
    const releasing = releases.release(hold);
    // Sent at once, and renewal stopped first.
    expect(calls.sent).toEqual([['1']]);
    expect(watchdog.untracked).toEqual(['orders']);
    await releasing;
    expect(hold.count).toBe(0);
    expect(forgotten).toEqual(['orders']);
    expect(watchdog.tracked).toEqual([]);
    expect(released).toEqual([{ name: 'orders', key: 'orders', holdCount: 0 }]);
  });

  it('sends two releases of one owner one after the other, each with the count it expects', async () => {
    const { releases, hold, calls, watchdog } = setup(['partial', 'freed'], 2);
    const first = releases.release(hold);
    const second = releases.release(hold);
    // Both releases together end the hold: renewal stops with the second call, before any reply.
    expect(watchdog.untracked).toEqual(['orders']);
    await Promise.all([first, second]);
    expect(calls.sent).toEqual([['2'], ['1']]);
    expect(hold.count).toBe(0);
  });

  it('rejects the release of a lost hold with LockNotOwnedError, saying why, and sends nothing', async () => {
    const { releases, hold, calls } = setup(['freed']);
    const lost = new LockLostError('Lock "orders" was force-unlocked', 'force-unlocked');
    hold.lose(lost);
    const error = await releases.release(hold).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(LockNotOwnedError);
    expect((error as Error).message).toContain('was force-unlocked');
    expect((error as Error).cause).toBe(lost);
    expect(calls.sent).toEqual([]);
  });

  it('declares the hold lost when Redis says the owner holds nothing, or a different count', async () => {
    for (const [reply, says] of [
      ['absent', 'is not held by this owner'],
      ['changed', 'its hold count changed behind its back'],
    ] as const) {
      const { releases, hold, lost, forgotten } = setup([reply]);
      const error = await releases.release(hold).catch((failure: unknown) => failure);
      expect(error).toBeInstanceOf(LockNotOwnedError);
      expect((error as Error).message).toContain(says);
      expect((error as Error).cause).toBe(hold.lostError);
      expect(lost).toEqual(['not-owner']);
      expect(forgotten).toEqual([]);
      expect(hold.releasing).toBe(0);
    }
  });

  it('rejects a reply it cannot read with REDIS_ERROR', async () => {
    const { releases, hold, lost } = setup(['OK']);
    const error = await releases.release(hold).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(LockError);
    expect((error as LockError).code).toBe('REDIS_ERROR');
    // Read by the call itself, which names its script and never shows the reply's text.
    expect((error as Error).message).toBe('Unexpected reply from Redis to script "release": a string');
    expect(lost).toEqual([]);
    expect(hold.releasing).toBe(0);
  });

  it('tries a failed release again, and takes what the retry found', async () => {
    const { releases, hold, calls, forgotten } = setup([new Error('connection reset'), 'freed']);
    await releases.release(hold);
    expect(calls.sent).toEqual([['1'], ['1']]);
    expect(forgotten).toEqual(['orders']);
  });

  it('retries only while the lock is known to be held and the retry window is open', async () => {
    const within = setup([new Error('connection reset')]);
    const failed = within.releases.release(within.hold).catch(() => undefined);
    await failed;
    const keepTrying = within.calls.keepTrying as () => boolean;
    // The lease (3 s from 0) outlasts the retry window (2 s from the send at 0).
    vi.advanceTimersByTime(RELEASE_RETRY_MS - 1);
    expect(keepTrying()).toBe(true);
    vi.advanceTimersByTime(1);
    expect(keepTrying()).toBe(false);

    const shortLease = setup([new Error('connection reset')]);
    shortLease.hold.validUntil = performance.now() + 500;
    await shortLease.releases.release(shortLease.hold).catch(() => undefined);
    const untilLeaseEnds = shortLease.calls.keepTrying as () => boolean;
    vi.advanceTimersByTime(499);
    expect(untilLeaseEnds()).toBe(true);
    shortLease.hold.lose(new LockLostError('Lock "orders" was lost', 'expired'));
    expect(untilLeaseEnds()).toBe(false);
  });

  it('leaves a last release Redis never confirmed to expire, and takes a repeat that finds it gone within the lease', async () => {
    const { releases, hold, calls, forgotten, lost } = setup([new Error('connection reset')]);
    const error = await releases.release(hold).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(LockError);
    expect((error as LockError).code).toBe('REDIS_ERROR');
    expect((error as Error).message).toBe('Redis failed while releasing lock "orders": connection reset');
    expect(hold.releaseUnconfirmed).toBe(true);
    expect(forgotten).toEqual(['orders']);
    // Asked again within the lease, a missing field means the first release went through.
    calls.answers.push('absent');
    await expect(releases.release(hold)).resolves.toBeUndefined();
    expect(lost).toEqual([]);
    expect(hold.count).toBe(0);
  });

  it('declares lost a repeated last release that finds the field gone after the lease ended', async () => {
    const { releases, hold, calls, lost } = setup([new Error('connection reset')]);
    await releases.release(hold).catch(() => undefined);
    vi.advanceTimersByTime(LEASE_MS);
    calls.answers.push('absent');
    await expect(releases.release(hold)).rejects.toBeInstanceOf(LockNotOwnedError);
    expect(lost).toEqual(['not-owner']);
  });

  it('resolves a release too few replicas acknowledged, and reports it on `error`', async () => {
    const { releases, hold, calls, errors, forgotten } = setup(['freed']);
    calls.replication = { count: 2, timeoutMs: 100 };
    calls.acknowledged = 1;
    await releases.release(hold);
    expect(forgotten).toEqual(['orders']);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ReplicationError);
    expect(errors[0]?.message).toBe(
      'Lock "orders" was released but only 1 of the 2 replicas required acknowledged the release in time',
    );
  });
});
