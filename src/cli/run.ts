import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, LockError } from '../index.js';
import { lockKey } from '../keys.js';
import { checkKey, checkText, MAX_NAME_LENGTH, MAX_PREFIX_LENGTH } from '../validate.js';
import { HELP, parseCommandLine, type Invocation } from './args.js';
import type { CommandContext } from './commands/context.js';
import { forceUnlock } from './commands/force-unlock.js';
import { inspect } from './commands/inspect.js';
import { list } from './commands/list.js';
import { watch } from './commands/watch.js';
import { Connection } from './connection.js';
import { CliError, ExitCode } from './exit-codes.js';
import type { CliIo } from './io.js';
import { HolderLabels } from './snapshot.js';

/** The package's version, from the package.json above this file (in src/cli/ or dist/). */
function version(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === 'latchkey' && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // No package.json here: look further up.
    }
    const parent = dirname(dir);
    if (parent === dir) return 'unknown';
    dir = parent;
  }
}

/** Checks the prefix and name as LockClient does, before anything is sent. */
function checkNames(invocation: Invocation): void {
  if (!('common' in invocation)) return;
  const { prefix } = invocation.common;
  checkText('--prefix', prefix, MAX_PREFIX_LENGTH, true);
  if ('name' in invocation) {
    checkText('name', invocation.name, MAX_NAME_LENGTH, false);
    checkKey(invocation.name, lockKey(prefix, invocation.name));
  }
}

/** Rejects with an INTERRUPTED error as soon as `signal` aborts; else settles as `work` does. */
function unlessInterrupted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new CliError(ExitCode.INTERRUPTED, 'Interrupted.'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new CliError(ExitCode.INTERRUPTED, 'Interrupted.'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

async function runCommand(invocation: Exclude<Invocation, { command: 'help' | 'version' }>, io: CliIo) {
  const { common } = invocation;
  const redis = await unlessInterrupted(Connection.open(common.url, common.timeoutMs), io.interrupted);
  const context: CommandContext = { io, redis, options: common, labels: new HolderLabels() };
  try {
    switch (invocation.command) {
      case 'inspect':
        return await unlessInterrupted(inspect(context, invocation.name, invocation.kind), io.interrupted);
      case 'list':
        return await unlessInterrupted(
          list(context, invocation.pattern, invocation.includeStrings, invocation.scanCount),
          io.interrupted,
        );
      case 'force-unlock':
        return await unlessInterrupted(
          forceUnlock(context, invocation.name, invocation.yes, invocation.kind),
          io.interrupted,
        );
      case 'watch':
        // Ctrl-C ends a watch normally.
        return await watch(
          context,
          invocation.name,
          invocation.intervalMs,
          invocation.count,
          invocation.durationMs,
          invocation.kind,
        );
    }
  } finally {
    await redis.close();
  }
}

function report(io: CliIo, error: unknown): ExitCode {
  if (error instanceof CliError) {
    io.stderr.write(`latchkey: ${error.message}\n`);
    return error.code;
  }
  if (error instanceof InvalidArgumentError) {
    io.stderr.write(`latchkey: ${error.message}\nRun \`latchkey --help\` for usage.\n`);
    return ExitCode.USAGE;
  }
  if (error instanceof LockError) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    io.stderr.write(`latchkey: ${error.message}${cause}\n`);
    return ExitCode.REDIS;
  }
  io.stderr.write(
    `latchkey: unexpected error (a bug; please report it):\n${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  return ExitCode.INTERNAL;
}

/**
 * Runs the `latchkey` command line `argv` (without `node` and the script) and resolves its exit
 * code. Never rejects: every failure is printed on `io.stderr` and becomes an exit code.
 * @internal
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  try {
    const invocation = parseCommandLine(argv, io.env);
    if (invocation.command === 'help') {
      io.stdout.write(HELP);
      return ExitCode.OK;
    }
    if (invocation.command === 'version') {
      io.stdout.write(`${version()}\n`);
      return ExitCode.OK;
    }
    checkNames(invocation);
    return await runCommand(invocation, io);
  } catch (error) {
    return report(io, error);
  }
}
