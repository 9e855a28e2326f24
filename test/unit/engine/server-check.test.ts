// The check that the server is recent enough, against fake calls (no Redis): asked once and
// remembered when it passes, shared by calls that come while it is in flight, refused for good
// when the server is too old, taken as passed when the server refuses INFO, and asked again
// after the server could not be reached.
import { ErrorReply } from 'redis';
import { describe, expect, it } from 'vitest';
import { ClientClosedError, LockError } from '../../../src/errors.js';
import type { Calls } from '../../../src/engine/calls.js';
import { ServerCheck } from '../../../src/engine/server-check.js';
import { CommandTimeoutError } from '../../../src/scripts/runner.js';

const info = (version: string): string => `# Server\r\nredis_version:${version}\r\nredis_mode:standalone\r\n`;

/** An answer the test gives later, through `pending`. */
const LATER = Symbol('later');

/** The part of Calls the check uses: each INFO is answered by the next of `answers`. */
class FakeCalls {
  readonly asked: string[][] = [];
  readonly versions: string[] = [];
  readonly pending: { resolve: (value: unknown) => void; reject: (error: unknown) => void }[] = [];
  constructor(readonly answers: (string | Error | typeof LATER)[]) {}
  sendOnce(args: string[]): Promise<unknown> {
    this.asked.push(args);
    const answer = this.answers.shift();
    if (answer === LATER) {
      return new Promise((resolve, reject) => this.pending.push({ resolve, reject }));
    }
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  }
  noteServerVersion(version: string): void {
    this.versions.push(version);
  }
}

function check(calls: FakeCalls): { check: ServerCheck; passes: () => number } {
  let passes = 0;
  const made = new ServerCheck(calls as unknown as Calls, () => (passes += 1));
  return { check: made, passes: () => passes };
}

describe('ServerCheck', () => {
  it('asks once, passes a recent server, tells the calls its version, and asks no more', async () => {
    const calls = new FakeCalls([info('7.2.4')]);
    const { check: server, passes } = check(calls);
    expect(server.passed).toBe(false);
    await expect(server.check(undefined)).resolves.toBeUndefined();
    await expect(server.check(undefined)).resolves.toBeUndefined();
    expect(server.passed).toBe(true);
    expect(calls.asked).toEqual([['INFO', 'server']]);
    expect(calls.versions).toEqual(['7.2.4']);
    expect(passes()).toBe(1);
  });

  it('shares one question among the calls that come while it is in flight', async () => {
    const calls = new FakeCalls([LATER]);
    const { check: server } = check(calls);
    const first = server.check(undefined);
    const second = server.check(undefined);
    expect(calls.asked).toHaveLength(1);
    calls.pending[0]?.resolve(info('6.0.6'));
    await expect(Promise.all([first, second])).resolves.toEqual([undefined, undefined]);
    expect(server.passed).toBe(true);
  });

  it('refuses a server older than 6.0.6 with UNSUPPORTED_SERVER, every time, without asking again', async () => {
    const calls = new FakeCalls([info('6.0.5')]);
    const { check: server, passes } = check(calls);
    const first = await server.check(undefined).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(LockError);
    expect((first as LockError).code).toBe('UNSUPPORTED_SERVER');
    expect((first as LockError).message).toContain('Redis 6.0.5 is too old');
    await expect(server.check(undefined)).rejects.toBe(first);
    expect(calls.asked).toHaveLength(1);
    expect(server.passed).toBe(false);
    expect(passes()).toBe(0);
  });

  it('passes a server whose reply names no version, and one that refuses INFO', async () => {
    const silent = new FakeCalls(['# Server\r\n']);
    const { check: quiet } = check(silent);
    await expect(quiet.check(undefined)).resolves.toBeUndefined();
    expect(quiet.passed).toBe(true);
    expect(silent.versions).toEqual([]);

    const refusing = new FakeCalls([
      new ErrorReply("NOPERM User app has no permissions to run the 'info' command"),
    ]);
    const { check: acl, passes } = check(refusing);
    await expect(acl.check(undefined)).resolves.toBeUndefined();
    expect(acl.passed).toBe(true);
    expect(passes()).toBe(1);
  });

  it('lets the call go on when the server cannot be reached, and asks again on the next one', async () => {
    const unreachable = new CommandTimeoutError(1_000, false);
    const calls = new FakeCalls([unreachable, info('7.4.0')]);
    const { check: server, passes } = check(calls);
    await expect(server.check(undefined)).resolves.toBe(unreachable);
    expect(server.passed).toBe(false);
    expect(passes()).toBe(0);
    await expect(server.check(undefined)).resolves.toBeUndefined();
    expect(calls.asked).toHaveLength(2);
    expect(passes()).toBe(1);
  });

  it('rejects with the ClientClosedError of a client closed first, and asks again after it', async () => {
    const closed = new ClientClosedError();
    const calls = new FakeCalls([closed, info('7.4.0')]);
    const { check: server } = check(calls);
    await expect(server.check(undefined)).rejects.toBe(closed);
    await expect(server.check(undefined)).resolves.toBeUndefined();
    expect(calls.asked).toHaveLength(2);
  });

  it("rejects an aborted call with the signal's reason at once, and leaves the question to the others", async () => {
    const calls = new FakeCalls([LATER]);
    const { check: server } = check(calls);
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    const abortable = server.check(controller.signal);
    const patient = server.check(undefined);
    controller.abort(reason);
    await expect(abortable).rejects.toBe(reason);
    calls.pending[0]?.resolve(info('7.4.0'));
    await expect(patient).resolves.toBeUndefined();
    expect(server.passed).toBe(true);
    // A signal aborted before the call rejects it at once too.
    const already = new FakeCalls([LATER]);
    const { check: fresh } = check(already);
    await expect(fresh.check(AbortSignal.abort(reason))).rejects.toBe(reason);
  });
});
