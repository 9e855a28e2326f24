// The engine's transport, against a fake script runner (no Redis) with the real reachability and
// replication: one try or retries of transient failures while the caller's bound allows and the
// client is open, a repeated call sent as the caller makes it, plain reads retried twice and
// their failures said in words, the replicas' acknowledgement read behind a synced write, and
// every unanswered try told to the reachability.
import { EventEmitter } from 'eventemitter3';
import { ErrorReply } from 'redis';
import { afterEach, describe, expect, it } from 'vitest';
import { ClientClosedError, LockError } from '../../../src/errors.js';
import { Calls } from '../../../src/engine/calls.js';
import { Events } from '../../../src/engine/events.js';
import { Reachability } from '../../../src/engine/reachability.js';
import { Replication } from '../../../src/engine/replication.js';
import { ScriptCall } from '../../../src/engine/script-call.js';
import type { LockClientEvents } from '../../../src/options.js';
import { CommandTimeoutError, type ScriptRunner } from '../../../src/scripts/runner.js';

const TIMEOUT_MS = 1_000;
const SCRIPT = { name: 'lock/acquire', numberOfKeys: 1 } as ScriptCall['script'];
/** Calls sends replies back raw: the reader is the caller's, never used here. */
const raw = (reply: unknown): unknown => reply;
const CALL = new ScriptCall(SCRIPT, ['orders'], ['1'], raw);
const REPEAT = new ScriptCall(SCRIPT, ['orders'], ['1', 'repeated'], raw);

/** A failure that may succeed when sent again. */
const timeout = (): Error => new CommandTimeoutError(TIMEOUT_MS, true);

interface Tried {
  readonly command: string;
  readonly args: readonly string[];
  readonly timeoutMs: number | undefined;
}

/** The part of the script runner Calls uses: each try takes the next answer (an Error fails it). */
class FakeRunner {
  readonly tried: Tried[] = [];
  connectionClosed = false;
  constructor(readonly answers: unknown[]) {}
  #next(tried: Tried): Promise<unknown> {
    this.tried.push(tried);
    const answer = this.answers.shift();
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  }
  run(
    script: ScriptCall['script'],
    _keys: readonly string[],
    args: readonly string[],
    timeoutMs: number,
  ): Promise<unknown> {
    return this.#next({ command: script.name, args, timeoutMs });
  }
  send(args: string[]): Promise<unknown> {
    // The replication's question about persistence is answered apart: AOF off, so WAIT.
    if (args[0] === 'INFO') return Promise.resolve('aof_enabled:0\r\n');
    return this.#next({ command: args[0] ?? '', args: args.slice(1), timeoutMs: undefined });
  }
  async runThen(
    script: ScriptCall['script'],
    _keys: readonly string[],
    args: readonly string[],
    then: string[],
    timeoutMs: number,
  ): Promise<{ reply: unknown; then: unknown }> {
    const reply = await this.#next({ command: script.name, args: [...args, '|', ...then], timeoutMs });
    return { reply, then: this.answers.shift() };
  }
  noteServerVersion(): void {}
}

describe('Calls', () => {
  const reaches: Reachability[] = [];
  afterEach(() => {
    for (const reach of reaches.splice(0)) reach.close();
  });

  function calls(
    runner: FakeRunner,
    options: { closed?: () => boolean; replicas?: number } = {},
  ): { calls: Calls; reach: Reachability } {
    const reach = new Reachability(
      { thresholdMs: 60_000, report: false, nameOf: () => undefined },
      new Events(new EventEmitter<LockClientEvents>()),
    );
    reaches.push(reach);
    const fakeRunner = runner as unknown as ScriptRunner;
    const replication =
      options.replicas === undefined
        ? undefined
        : new Replication({ count: options.replicas, timeoutMs: 50 }, fakeRunner);
    const made = new Calls(fakeRunner, TIMEOUT_MS, options.closed ?? (() => false), reach, replication);
    return { calls: made, reach };
  }

  it('sends one try and leaves its failure to the caller', async () => {
    const runner = new FakeRunner([timeout()]);
    await expect(calls(runner).calls.once(CALL, 250)).rejects.toBeInstanceOf(CommandTimeoutError);
    expect(runner.tried).toEqual([{ command: 'lock/acquire', args: ['1'], timeoutMs: 250 }]);
  });

  it('gives the raw reply of one try, with no replica to count without syncReplicas', async () => {
    const runner = new FakeRunner([[1, 'x']]);
    await expect(calls(runner).calls.once(CALL, 250)).resolves.toEqual({
      reply: [1, 'x'],
      acknowledged: Number.POSITIVE_INFINITY,
    });
    expect(runner.tried).toEqual([{ command: 'lock/acquire', args: ['1'], timeoutMs: 250 }]);
  });

  it('retries a transient failure while the caller wants, and tells the reachability until an answer comes', async () => {
    const runner = new FakeRunner([timeout(), timeout(), 'OK']);
    const { calls: made, reach } = calls(runner);
    const asked: number[] = [];
    const replied = made.idempotent(CALL, (attempt) => {
      asked.push(attempt);
      return true;
    });
    expect(runner.tried).toHaveLength(1);
    await expect(replied).resolves.toBe('OK');
    expect(runner.tried).toHaveLength(3);
    expect(asked).toEqual([1, 2]);
    expect(reach.watching).toBe(false);
  });

  it('gives up with the last failure once the caller says so', async () => {
    const last = timeout();
    const runner = new FakeRunner([timeout(), timeout(), last, 'OK']);
    const { calls: made, reach } = calls(runner);
    await expect(made.idempotent(CALL, (attempt) => attempt < 3)).rejects.toBe(last);
    expect(runner.tried).toHaveLength(3);
    expect(reach.watching).toBe(true);
  });

  it('never retries a refusal of the server, nor on a closed client', async () => {
    const refusal = new ErrorReply('WRONGTYPE Operation against a key holding the wrong kind of value');
    const refused = new FakeRunner([refusal, 'OK']);
    await expect(calls(refused).calls.idempotent(CALL, () => true)).rejects.toBe(refusal);
    expect(refused.tried).toHaveLength(1);

    let closed = false;
    const closing = new FakeRunner([timeout(), 'OK']);
    const sent = calls(closing, { closed: () => closed }).calls.idempotent(CALL, () => true);
    closed = true;
    await expect(sent).rejects.toBeInstanceOf(CommandTimeoutError);
    expect(closing.tried).toHaveLength(1);
  });

  it('retries a busy server, and gives no try more time than is left before the bound', async () => {
    const runner = new FakeRunner([new ErrorReply('BUSY Redis is busy running a script'), 'OK']);
    const until = performance.now() + 300;
    await expect(calls(runner).calls.idempotent(CALL, () => true, until)).resolves.toBe('OK');
    const [first, second] = runner.tried;
    expect(first?.timeoutMs).toBeLessThanOrEqual(300);
    expect(first?.timeoutMs).toBeGreaterThan(200);
    expect(second?.timeoutMs).toBeLessThan(first?.timeoutMs ?? 0);
  });

  it('sends the repeated call the caller makes for every try after the first, and makes it only then', async () => {
    const runner = new FakeRunner(['OK', timeout(), timeout(), 'OK']);
    let made = 0;
    const repeat = (): ScriptCall => {
      made += 1;
      return REPEAT;
    };
    const { calls: transport } = calls(runner);
    await transport.idempotent(CALL, () => true, Number.POSITIVE_INFINITY, repeat);
    expect(made).toBe(0);
    await transport.idempotent(CALL, () => true, Number.POSITIVE_INFINITY, repeat);
    expect(made).toBe(1);
    expect(runner.tried.map((tried) => tried.args)).toEqual([['1'], ['1'], REPEAT.args, REPEAT.args]);
  });

  it('reads the replicas that acknowledged a synced write from the wait behind it', async () => {
    const runner = new FakeRunner(['OK', 1]);
    await expect(calls(runner, { replicas: 2 }).calls.once(CALL, 500)).resolves.toEqual({
      reply: 'OK',
      acknowledged: 1,
    });
    expect(runner.tried).toEqual([
      { command: 'lock/acquire', args: ['1', '|', 'WAIT', '2', '50'], timeoutMs: 500 },
    ]);

    const unreplicated = new FakeRunner(['OK']);
    await expect(calls(unreplicated).calls.synced(CALL, () => true)).resolves.toEqual({
      reply: 'OK',
      acknowledged: Number.POSITIVE_INFINITY,
    });
  });

  it('goes on with a synced write whose first try the caller sent, as long as the caller wants', async () => {
    const runner = new FakeRunner([timeout(), 'OK', 2]);
    const { calls: transport, reach } = calls(runner, { replicas: 2 });
    const first = timeout();
    const retried = transport.retry(first, CALL, (attempt) => attempt < 5);
    expect(reach.watching).toBe(true);
    await expect(retried).resolves.toEqual({ reply: 'OK', acknowledged: 2 });
    expect(runner.tried).toHaveLength(2);
    await expect(transport.retry(first, CALL, () => false)).rejects.toBe(first);
  });

  it('retries a plain read twice, then says what it was doing', async () => {
    const runner = new FakeRunner([timeout(), timeout(), timeout(), '1']);
    const error = await calls(runner)
      .calls.command(['EXISTS', 'orders'], 'reading lock "orders"')
      .catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(LockError);
    expect((error as LockError).code).toBe('REDIS_ERROR');
    expect((error as Error).message).toBe(
      `Redis failed while reading lock "orders": Redis did not answer within ${TIMEOUT_MS} ms`,
    );
    expect(runner.tried).toHaveLength(3);
  });

  it('refuses a read on a closed client without sending it', async () => {
    const runner = new FakeRunner(['1']);
    const { calls: transport } = calls(runner, { closed: () => true });
    await expect(transport.command(['EXISTS', 'orders'], 'reading lock "orders"')).rejects.toBeInstanceOf(
      ClientClosedError,
    );
    await expect(transport.sendOnce(['INFO', 'server'])).rejects.toBeInstanceOf(ClientClosedError);
    expect(runner.tried).toEqual([]);
  });

  it('makes request ids unique to the client', () => {
    const runner = new FakeRunner([]);
    const first = calls(runner).calls;
    const second = calls(runner).calls;
    const ids = [first.nextRequestId(), first.nextRequestId(), second.nextRequestId()];
    expect(new Set(ids).size).toBe(3);
    expect(ids[0]?.slice(0, 12)).toBe(ids[1]?.slice(0, 12));
    expect(ids[0]?.slice(0, 12)).not.toBe(ids[2]?.slice(0, 12));
  });
});
