/**
 * The child side of child.ts: imported by worker scripts, never by tests.
 * Protocol: one JSON object per line, parent -> child on stdin, child -> parent on stdout.
 * Anything else a worker prints to stdout is kept by the parent as a log line.
 */
import { createInterface } from 'node:readline';

/**
 * Monotonic nanoseconds. process.hrtime is CLOCK_MONOTONIC on Linux, one clock for the
 * whole machine, so stamps from different worker processes can be ordered against each other.
 */
export function nowNs(): bigint {
  return process.hrtime.bigint();
}

// JSON.stringify throws on bigint; worker messages often carry nanosecond stamps.
function bigintAsString(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** Sends one message to the parent, stamped with `t` (nowNs() as a decimal string). */
export function emit(msg: object): void {
  const line = JSON.stringify({ ...msg, t: nowNs().toString() }, bigintAsString);
  // Writes to a pipe are synchronous on Linux, so a message emitted right before
  // process.exit() still reaches the parent.
  process.stdout.write(`${line}\n`);
}

type Handler = (msg: unknown) => void | Promise<void>;

const handlers: Handler[] = [];
let reading = false;

function fail(error: unknown): never {
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`worker message handler failed: ${text}\n`);
  // Dying loudly makes the parent's next() fail at once with this stderr attached,
  // instead of timing out on a message that will never come.
  process.exit(1);
}

function startReading(): void {
  if (reading) return;
  reading = true;
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', (line) => {
    if (line.trim() === '') return;
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      process.stderr.write(`worker ignored a stdin line that is not JSON: ${line}\n`);
      return;
    }
    // Handlers run concurrently: a worker blocked in one (say, waiting for a lock) must
    // still receive the next message (say, an abort).
    for (const handler of handlers) {
      try {
        const result = handler(msg);
        if (result instanceof Promise) result.catch(fail);
      } catch (error) {
        fail(error);
      }
    }
  });
  // stdin closes when the parent ends it or dies; either way nobody is listening any more,
  // and a worker left running would be an orphan holding locks.
  lines.on('close', () => process.exit(0));
}

/** Calls `handler` with every JSON message the parent sends; keeps the process alive. */
export function onMessage(handler: Handler): void {
  handlers.push(handler);
  startReading();
}
