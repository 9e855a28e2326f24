/**
 * Runs the `latchkey` command as a real child process, from the sources (`node --import tsx
 * src/cli/main.ts`) or from a built file, and collects its output and exit code.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { nodeArgsFor } from './bundles.js';
import { onProcessExit } from './cleanup.js';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * How the CLI is started: node's arguments before the CLI's own. The sources, bundled once for
 * this run (see bundles.ts), else through tsx.
 */
export const FROM_SOURCES: readonly string[] = nodeArgsFor('src/cli/main.ts');

export interface CliRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** From spawn to exit, in milliseconds. */
  readonly elapsedMs: number;
}

export interface CliRunOptions {
  /** Written to stdin, which is then closed (stdin is a pipe, never a terminal). */
  readonly stdin?: string;
  /** The command to run instead of node with {@link FROM_SOURCES}, e.g. a built dist/cli.js. */
  readonly command?: readonly string[];
  /** Killed (SIGKILL) after this long; the run then has signal SIGKILL. Default 60 s. */
  readonly killAfterMs?: number;
}

/**
 * Only a CLI that hangs is killed: node and tsx alone take several seconds to start on a loaded
 * two-core machine, and several runs may start at once.
 */
const DEFAULT_KILL_AFTER_MS = 60_000;

/**
 * Runs the CLI with `args` to the end. REDIS_URL is removed from its environment so a test
 * that forgets `--url` fails instead of reaching a server it does not own.
 */
export function runCli(args: readonly string[], options: CliRunOptions = {}): Promise<CliRun> {
  const [command, ...prefix] = options.command ?? [process.execPath, ...FROM_SOURCES];
  if (command === undefined) throw new Error('runCli: empty command');
  const env = { ...process.env };
  delete env.REDIS_URL;
  const started = performance.now();
  const child = spawn(command, [...prefix, ...args], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  const unregister = onProcessExit(() => {
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), options.killAfterMs ?? DEFAULT_KILL_AFTER_MS);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.on('error', () => {});
  child.stdin.end(options.stdin ?? '');
  return new Promise<CliRun>((resolve, reject) => {
    child.once('error', (error) => {
      clearTimeout(killer);
      unregister();
      reject(error);
    });
    // 'close', not 'exit': all output has been read by then.
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      unregister();
      resolve({ code, signal, stdout, stderr, elapsedMs: performance.now() - started });
    });
  });
}

/** `run` as one string for assertion messages. */
export function describeRun(run: CliRun): string {
  return `exit ${String(run.code)} (signal ${String(run.signal)}) after ${Math.round(run.elapsedMs)} ms\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
}

/** Parses stdout as JSON (one value) or as JSON lines. */
export function jsonOf<T = Record<string, unknown>>(run: CliRun): T {
  return JSON.parse(run.stdout) as T;
}

export function jsonLinesOf<T = Record<string, unknown>>(run: CliRun): T[] {
  return run.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
/** A random token as latchkey's simple lock writes it (128 bits in hex). */
const HEX_TOKEN = /[0-9a-f]{32}/i;

/**
 * Asserts, by throwing, that nothing secret leaked: none of `secrets` (owner fields, client ids,
 * tokens, wait-queue entries, read from Redis by the test) appears in stdout or stderr, and no
 * UUID or 32-hex-digit token does either.
 */
export function assertNoSecrets(run: CliRun, secrets: readonly string[]): void {
  const output = run.stdout + run.stderr;
  for (const secret of secrets) {
    if (secret !== '' && output.includes(secret)) {
      throw new Error(`CLI output contains a secret (${secret.length} chars)\n${describeRun(run)}`);
    }
  }
  if (UUID.test(output)) throw new Error(`CLI output contains a UUID\n${describeRun(run)}`);
  if (HEX_TOKEN.test(output))
    throw new Error(`CLI output contains a 32-hex-digit token\n${describeRun(run)}`);
}
