/**
 * Real child processes for cross-process tests (two services sharing a lock, a holder that
 * gets SIGKILLed, a redis-py client, ...). The child side of the protocol is worker-io.ts for
 * Node workers; fixtures in other languages speak the same JSON lines.
 */
import { spawn } from 'node:child_process';
import { resolve as resolvePath } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { nodeArgsFor } from './bundles.js';
import { onProcessExit } from './cleanup.js';

/** One JSON object a worker emitted; worker-io's emit() adds `t` (monotonic ns, decimal). */
export interface WorkerMessage {
  readonly t?: string;
  readonly [key: string]: unknown;
}

export interface WorkerExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface Worker {
  readonly pid: number;
  /** Every message received so far, in order, whether or not next() consumed it. */
  readonly messages: readonly WorkerMessage[];
  /** stdout lines that were not JSON objects (stray console.log output). */
  readonly logs: readonly string[];
  /** Everything the worker wrote to stderr so far. */
  readonly stderr: string;
  /** Resolves once the worker has exited and its output has been read to the end. */
  readonly exited: Promise<WorkerExit>;
  /** Writes `msg` as one JSON line to the worker's stdin. */
  send(msg: unknown): void;
  /**
   * The oldest message not yet returned by next() that matches `predicate`, waiting for it
   * if needed. Messages that arrived before the call count, so there is no race with a
   * worker that answers quickly.
   */
  next(predicate?: (msg: WorkerMessage) => boolean, timeoutMs?: number): Promise<WorkerMessage>;
  kill(signal?: NodeJS.Signals): void;
  /** Kills the worker (default SIGKILL) and waits until it is gone. */
  stop(signal?: NodeJS.Signals): Promise<WorkerExit>;
}

const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DEFAULT_NEXT_TIMEOUT_MS = 10_000;
const DIAGNOSTIC_CHARS = 4_000;

interface Waiter {
  readonly predicate: (msg: WorkerMessage) => boolean;
  readonly resolve: (msg: WorkerMessage) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

function isMessage(value: unknown): value is WorkerMessage {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tail(text: string): string {
  return text.length > DIAGNOSTIC_CHARS ? `...${text.slice(-DIAGNOSTIC_CHARS)}` : text;
}

/**
 * Runs `scriptPath` (a TypeScript fixture: its bundle built for this run, else through tsx; see
 * bundles.ts) in a new Node process whose cwd is the project root, so package imports resolve
 * as they do for the tests.
 */
export function spawnWorker(scriptPath: string, env?: Record<string, string>): Worker {
  return spawnProcess(process.execPath, nodeArgsFor(resolvePath(scriptPath)), env);
}

/**
 * Runs any program that speaks the worker protocol (JSON lines both ways; see worker-io.ts)
 * as a worker, e.g. a Python script, with the project root as its cwd.
 */
export function spawnProcess(command: string, args: readonly string[], env?: Record<string, string>): Worker {
  const commandLine = [command, ...args].join(' ');
  const child = spawn(command, args, {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not spawn a worker: ${commandLine}`);

  const unregister = onProcessExit(() => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  });

  const messages: WorkerMessage[] = [];
  const unconsumed: WorkerMessage[] = [];
  const logs: string[] = [];
  const waiters: Waiter[] = [];
  let stderr = '';
  let exit: WorkerExit | undefined;

  const describe = (): string =>
    [
      `worker ${commandLine} (pid ${pid})`,
      exit === undefined
        ? 'still running'
        : `exited with code ${String(exit.code)}, signal ${String(exit.signal)}`,
      `last messages: ${JSON.stringify(messages.slice(-5))}`,
      `stdout logs:\n${tail(logs.join('\n'))}`,
      `stderr:\n${tail(stderr)}`,
    ].join('\n');

  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  // A worker that died makes writes to its stdin fail with EPIPE; exited/next() report that.
  child.stdin.on('error', () => {});

  const deliver = (msg: WorkerMessage): void => {
    messages.push(msg);
    const index = waiters.findIndex((waiter) => waiter.predicate(msg));
    const waiter = index === -1 ? undefined : waiters.splice(index, 1)[0];
    if (waiter === undefined) {
      unconsumed.push(msg);
      return;
    }
    clearTimeout(waiter.timer);
    waiter.resolve(msg);
  };

  createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
    if (line.trimStart().startsWith('{')) {
      try {
        const parsed: unknown = JSON.parse(line);
        if (isMessage(parsed)) {
          deliver(parsed);
          return;
        }
      } catch {
        // Not JSON after all: keep it as a log line.
      }
    }
    logs.push(line);
  });

  // 'close' rather than 'exit': only then has every line of stdout been delivered.
  const exited = new Promise<WorkerExit>((resolve) => {
    child.once('close', (code, signal) => {
      exit = { code, signal };
      unregister();
      for (const waiter of waiters.splice(0)) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error(`worker exited before sending the awaited message\n${describe()}`));
      }
      resolve(exit);
    });
  });

  const kill = (signal: NodeJS.Signals = 'SIGKILL'): void => {
    if (exit === undefined) child.kill(signal);
  };

  return {
    pid,
    messages,
    logs,
    get stderr(): string {
      return stderr;
    },
    exited,
    send(msg: unknown): void {
      if (exit !== undefined || !child.stdin.writable) {
        throw new Error(`cannot send to a worker that has exited\n${describe()}`);
      }
      child.stdin.write(`${JSON.stringify(msg)}\n`);
    },
    next(
      predicate: (msg: WorkerMessage) => boolean = () => true,
      timeoutMs = DEFAULT_NEXT_TIMEOUT_MS,
    ): Promise<WorkerMessage> {
      const index = unconsumed.findIndex(predicate);
      const queued = index === -1 ? undefined : unconsumed.splice(index, 1)[0];
      if (queued !== undefined) return Promise.resolve(queued);
      if (exit !== undefined) {
        return Promise.reject(new Error(`worker exited before sending the awaited message\n${describe()}`));
      }
      return new Promise<WorkerMessage>((resolve, reject) => {
        const timer = setTimeout(() => {
          const at = waiters.indexOf(waiter);
          if (at !== -1) waiters.splice(at, 1);
          reject(new Error(`no matching message from the worker within ${timeoutMs} ms\n${describe()}`));
        }, timeoutMs);
        const waiter: Waiter = { predicate, resolve, reject, timer };
        waiters.push(waiter);
      });
    },
    kill,
    stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<WorkerExit> {
      kill(signal);
      return exited;
    },
  };
}
