// Parent and child sides of the worker protocol: Node IPC (fork) with request ids, plus events
// the child sends on its own (e.g. "I am about to call acquire"). Children run through tsx.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface Request {
  readonly op: string;
  readonly [field: string]: unknown;
}

export interface WorkerEvent {
  readonly event: string;
  readonly [field: string]: unknown;
}

type Reply =
  | { readonly id: number; readonly ok: true; readonly result: unknown }
  | { readonly id: number; readonly ok: false; readonly error: string };

type Inbound = Reply | WorkerEvent;

/** Nanoseconds on the machine's monotonic clock, relative to the parent's base (fits a double). */
export const CLOCK_BASE_ENV = 'BENCH_CLOCK_BASE';
const base = BigInt(process.env[CLOCK_BASE_ENV] ?? '0');
export function nowNs(): number {
  return Number(process.hrtime.bigint() - base);
}

const WORKER_PATH = fileURLToPath(new URL('./worker.ts', import.meta.url));

export class WorkerHandle {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly #listeners: ((event: WorkerEvent) => void)[] = [];
  #nextId = 1;
  readonly exited: Promise<number | null>;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on('message', (message: Inbound) => {
      if ('event' in message) {
        for (const listener of [...this.#listeners]) listener(message);
        return;
      }
      const pending = this.#pending.get(message.id);
      if (pending === undefined) return;
      this.#pending.delete(message.id);
      if (message.ok) pending.resolve(message.result);
      else pending.reject(new Error(message.error));
    });
    this.exited = new Promise((resolve) => {
      child.once('exit', (code) => {
        for (const pending of this.#pending.values()) {
          pending.reject(new Error(`worker exited (${String(code)}) with a call pending`));
        }
        this.#pending.clear();
        resolve(code);
      });
    });
  }

  static async spawn(options: { gc?: boolean; clockBase: bigint }): Promise<WorkerHandle> {
    const child = fork(WORKER_PATH, [], {
      execArgv: ['--import', 'tsx', ...(options.gc === true ? ['--expose-gc'] : [])],
      env: { ...process.env, [CLOCK_BASE_ENV]: options.clockBase.toString() },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const handle = new WorkerHandle(child);
    await handle.next((event) => event.event === 'up', 60_000);
    return handle;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  call<R>(request: Request, timeoutMs = 600_000): Promise<R> {
    const id = this.#nextId++;
    return new Promise<R>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`worker call ${request.op} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value as R);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.#child.send({ id, ...request });
    });
  }

  /** Fire-and-forget message (e.g. the start barrier's "go"). */
  send(message: Record<string, unknown>): void {
    this.#child.send(message);
  }

  next(predicate: (event: WorkerEvent) => boolean, timeoutMs: number): Promise<WorkerEvent> {
    return new Promise((resolve, reject) => {
      const listener = (event: WorkerEvent): void => {
        if (!predicate(event)) return;
        clearTimeout(timer);
        this.#listeners.splice(this.#listeners.indexOf(listener), 1);
        resolve(event);
      };
      const timer = setTimeout(() => {
        this.#listeners.splice(this.#listeners.indexOf(listener), 1);
        reject(new Error(`no matching worker event within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#listeners.push(listener);
    });
  }

  /** Asks the worker to close its sessions and exit; kills it if it does not. */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    try {
      await this.call({ op: 'exit' }, 15_000);
    } catch {
      // Exiting or unresponsive: the kill below settles it.
    }
    const killer = setTimeout(() => this.#child.kill('SIGKILL'), 5_000);
    await this.exited;
    clearTimeout(killer);
  }
}

export async function spawnWorkers(count: number, clockBase: bigint, gc = false): Promise<WorkerHandle[]> {
  return Promise.all(Array.from({ length: count }, () => WorkerHandle.spawn({ gc, clockBase })));
}
