// The wait for replicas behind a write (`syncReplicas`), over a fake runner (no Redis): WAIT, or
// WAITAOF when the master appends to an AOF, found out once; the acknowledgements read from either
// reply; a server that refuses WAITAOF turned to WAIT for good; and the retries of a grant too few
// replicas acknowledged, with backoff, up to the deadline, on vitest's fake clock.
import { ErrorReply } from 'redis';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ClientClosedError, ReplicationError } from '../../../src/errors.js';
import { Replication, retryUnreplicated, type Unreplicated } from '../../../src/engine/replication.js';
import { CommandTimeoutError, type ScriptRunner } from '../../../src/scripts/runner.js';

/** The part of the runner a Replication uses: INFO persistence, answered in turn. */
class FakeRunner {
  asked = 0;
  constructor(readonly answers: (string | Error)[]) {}
  send(): Promise<unknown> {
    this.asked += 1;
    const answer = this.answers.shift();
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  }
}

function replication(answers: (string | Error)[]): { replication: Replication; runner: FakeRunner } {
  const runner = new FakeRunner(answers);
  return {
    replication: new Replication({ count: 2, timeoutMs: 100 }, runner as unknown as ScriptRunner),
    runner,
  };
}

describe('Replication', () => {
  it('waits with WAIT when the master keeps no AOF, and asks only once', async () => {
    const { replication: made, runner } = replication(['# Persistence\r\naof_enabled:0\r\n']);
    await expect(made.command()).resolves.toEqual(['WAIT', '2', '100']);
    await expect(made.command()).resolves.toEqual(['WAIT', '2', '100']);
    expect(runner.asked).toBe(1);
  });

  it('waits with WAITAOF when the master appends to an AOF, and turns to WAIT for good when it is refused', async () => {
    const { replication: made, runner } = replication(['# Persistence\r\naof_enabled:1\r\n']);
    await expect(made.command()).resolves.toEqual(['WAITAOF', '0', '2', '100']);
    expect(made.acknowledged([1, 2])).toBe(2);
    expect(made.acknowledged(new ErrorReply("ERR unknown command 'WAITAOF'"))).toBe(0);
    await expect(made.command()).resolves.toEqual(['WAIT', '2', '100']);
    expect(runner.asked).toBe(1);
  });

  it('takes a server that refuses INFO as WAIT, and asks again after one it could not reach', async () => {
    const refused = replication([new ErrorReply('NOPERM no permissions to run the info command')]);
    await expect(refused.replication.command()).resolves.toEqual(['WAIT', '2', '100']);

    const unreachable = new CommandTimeoutError(1_000, false);
    const down = replication([unreachable, 'aof_enabled:1\r\n']);
    await expect(down.replication.command()).rejects.toBe(unreachable);
    await expect(down.replication.command()).resolves.toEqual(['WAITAOF', '0', '2', '100']);
    expect(down.runner.asked).toBe(2);
  });

  it('reads the acknowledgements of WAIT, and 0 from a failure or a reply it does not know', () => {
    const { replication: made } = replication([]);
    expect(made.acknowledged(1)).toBe(1);
    expect(made.acknowledged('2')).toBe(2);
    expect(made.acknowledged(new Error('timed out'))).toBe(0);
    expect(made.acknowledged('OK')).toBe(0);
  });
});

describe('retryUnreplicated', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function unreplicated(rolledBack: string[], name: string): Unreplicated {
    return {
      unreplicated: new ReplicationError(`${name}: only 0 of the 2 replicas required acknowledged it`, 0, 2),
      rollback: Promise.resolve().then(() => {
        rolledBack.push(name);
      }),
    };
  }

  it('tries again after 50 ms, then twice as long each time, and resolves with the first replicated outcome', async () => {
    const tries: number[] = [];
    const rolledBack: string[] = [];
    const start = performance.now();
    const outcome = retryUnreplicated(
      () => {
        tries.push(performance.now() - start);
        return Promise.resolve(
          tries.length < 4 ? unreplicated(rolledBack, `try ${tries.length}`) : { held: true },
        );
      },
      start + 10_000,
      undefined,
      () => undefined,
      100,
    );
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(outcome).resolves.toEqual({ held: true });
    expect(tries).toEqual([0, 50, 150, 350]);
  });

  it('rejects with the last ReplicationError once the deadline leaves no room, once its rollback is done', async () => {
    const start = performance.now();
    const rollbacks: { name: string; at: number }[] = [];
    let tries = 0;
    const rollingBackFor = (ms: number) => (): Promise<Unreplicated> => {
      tries += 1;
      const name = `try ${tries}`;
      return Promise.resolve({
        unreplicated: new ReplicationError(
          `${name}: only 0 of the 2 replicas required acknowledged it`,
          0,
          2,
        ),
        rollback: new Promise<void>((resolve) =>
          setTimeout(() => {
            rollbacks.push({ name, at: performance.now() - start });
            resolve();
          }, ms),
        ),
      });
    };
    const settledAt = (outcome: Promise<unknown>): Promise<{ error: unknown; at: number }> =>
      outcome.then(
        () => ({ error: undefined, at: performance.now() - start }),
        (error: unknown) => ({ error, at: performance.now() - start }),
      );
    // Tried at 0 and at 50; then the next pause (100 ms) would pass the deadline (120).
    const quick = settledAt(
      retryUnreplicated(rollingBackFor(30), start + 120, undefined, () => undefined, 100),
    );
    await vi.advanceTimersByTimeAsync(1_000);
    const { error, at } = await quick;
    expect(error).toBeInstanceOf(ReplicationError);
    expect((error as Error).message).toMatch(/^try 2:/);
    expect(at).toBe(80);
    expect(rollbacks).toEqual([
      { name: 'try 1', at: 30 },
      { name: 'try 2', at: 80 },
    ]);
    // A rollback Redis does not answer is waited for `rollbackWaitMs`, no longer.
    tries = 0;
    const slowStart = performance.now();
    const slow = retryUnreplicated(rollingBackFor(5_000), slowStart + 120, undefined, () => undefined, 100);
    const slowSettled = slow.then(
      () => undefined,
      () => performance.now() - slowStart,
    );
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(slowSettled).resolves.toBe(150);
    await vi.advanceTimersByTimeAsync(10_000);
  });

  it("rejects with the signal's reason on abort at once, and with the client's closing after a pause", async () => {
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    const aborted = retryUnreplicated(
      () => Promise.resolve(unreplicated([], 'try')),
      performance.now() + 10_000,
      controller.signal,
      () => undefined,
      100,
    );
    await vi.advanceTimersByTimeAsync(10);
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);

    const closed = new ClientClosedError();
    let open = true;
    const closing = retryUnreplicated(
      () => Promise.resolve(unreplicated([], 'try')),
      performance.now() + 10_000,
      undefined,
      () => {
        if (!open) throw closed;
      },
      100,
    );
    closing.catch(() => undefined);
    open = false;
    await vi.advanceTimersByTimeAsync(50);
    await expect(closing).rejects.toBe(closed);
  });
});
