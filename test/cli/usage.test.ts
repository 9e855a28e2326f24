import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, runCli } from '../support/cli.js';
import { sharedRedis } from '../support/redis-server.js';

/** A loopback port nothing listens on: connecting to it is refused at once. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

// Each test runs the CLI, whose node and tsx start slowly on a loaded two-core machine.
describe('latchkey usage, help and unreachable servers', { timeout: 120_000 }, () => {
  /** Accepts connections and never answers: a server that hangs. */
  let silent: Server;
  const sockets = new Set<Socket>();
  let silentUrl = '';
  let refusedUrl = '';

  beforeAll(async () => {
    silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `redis://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    refusedUrl = `redis://127.0.0.1:${await closedPort()}`;
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('prints help with the commands and exit codes, exit 0', async () => {
    const run = await runCli(['--help']);
    expect(run.code, describeRun(run)).toBe(0);
    for (const text of ['inspect <name>', 'list', 'force-unlock <name>', 'watch <name>', '--url', '--json']) {
      expect(run.stdout).toContain(text);
    }
    for (const code of ['0', '1', '2', '3', '4'])
      expect(run.stdout).toMatch(new RegExp(`^ {2}${code} {4}\\S`, 'm'));
  });

  it('exits 2 on bad usage, before connecting to anything', async () => {
    // The URL refuses connections: a command that tried to connect would exit 3, not 2.
    const cases: string[][] = [
      [],
      ['unlock', 'invoice:42'],
      ['inspect'],
      ['inspect', 'a', 'b'],
      ['inspect', 'invoice:42', '--colour'],
      ['list', 'invoice:42'],
      ['list', '--yes'],
      ['watch', 'invoice:42', '--interval', 'soon'],
      ['watch', 'invoice:42', '--count', '0'],
      ['inspect', 'invoice:{42'],
      ['inspect', 'invoice:42', '--prefix', 'bad\nprefix'],
    ];
    // A few at a time: each is a node process, and the machine may have two cores.
    const runs = [];
    for (let i = 0; i < cases.length; i += 4) {
      runs.push(
        ...(await Promise.all(cases.slice(i, i + 4).map((args) => runCli([...args, '--url', refusedUrl])))),
      );
    }
    for (const run of runs) {
      expect(run.code, describeRun(run)).toBe(2);
      expect(run.stderr).toMatch(/^latchkey: /);
      expect(run.stdout).toBe('');
    }
    const badUrl = await runCli(['inspect', 'invoice:42', '--url', 'http://127.0.0.1:6379']);
    expect(badUrl.code, describeRun(badUrl)).toBe(2);
  });

  it('exits 3 at once when the server refuses, naming the URL without its password', async () => {
    const url = refusedUrl.replace('redis://', 'redis://ops:hunter2@');
    // What starting node and the CLI costs on this machine now, with no Redis call at all.
    const started = await runCli(['--version']);
    const run = await runCli(['inspect', 'invoice:42', '--url', url]);
    expect(run.code, describeRun(run)).toBe(3);
    expect(run.stderr).toContain(`Cannot reach Redis at ${refusedUrl.replace('redis://', 'redis://ops@')}`);
    expect(run.stdout + run.stderr).not.toContain('hunter2');
    // No reconnect loop: little more than a start of the CLI.
    expect(run.elapsedMs).toBeLessThan(started.elapsedMs + 5_000);
  });

  it('exits 3 after --timeout when the server never answers', async () => {
    const started = await runCli(['--version']);
    const run = await runCli(['list', '--url', silentUrl, '--timeout', '300']);
    expect(run.code, describeRun(run)).toBe(3);
    expect(run.stderr).toContain(`Cannot reach Redis at ${silentUrl}`);
    expect(run.stderr).toContain('no answer within 300 ms');
    expect(run.elapsedMs).toBeLessThan(started.elapsedMs + 5_000);
  });

  it('exits 3 when Redis answers with an error', async () => {
    const { url } = await sharedRedis();
    // The test server has no user `ops`: AUTH is refused (WRONGPASS).
    const withPassword = url.replace('redis://', 'redis://ops:hunter2@');
    const run = await runCli(['inspect', 'invoice:42', '--url', withPassword]);
    expect(run.code, describeRun(run)).toBe(3);
    expect(run.stderr).toContain(`Cannot reach Redis at ${url.replace('redis://', 'redis://ops@')}`);
    expect(run.stderr).toContain('WRONGPASS');
    expect(run.stdout + run.stderr).not.toContain('hunter2');
  });
});
