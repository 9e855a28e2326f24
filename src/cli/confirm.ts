import { createInterface } from 'node:readline';
import type { CliIo } from './io.js';

/**
 * Asks on stderr (stdout stays clean for `--json`) and reads one line from stdin. Resolves true
 * only when the answer is exactly `expected`; false on any other answer, end of input, Ctrl-C,
 * or `io.interrupted`.
 * @internal
 */
export function askToConfirm(io: CliIo, question: string, expected: string): Promise<boolean> {
  if (io.interrupted.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const rl = createInterface({
      input: io.stdin,
      output: io.stderr as NodeJS.WritableStream,
      terminal: io.interactive,
    });
    let settled = false;
    const finish = (confirmed: boolean): void => {
      if (settled) return;
      settled = true;
      io.interrupted.removeEventListener('abort', onAbort);
      rl.close();
      resolve(confirmed);
    };
    const onAbort = (): void => finish(false);
    io.interrupted.addEventListener('abort', onAbort, { once: true });
    // Ctrl-C at the prompt of a terminal reaches readline, not the process.
    rl.on('SIGINT', () => finish(false));
    rl.on('close', () => finish(false));
    rl.question(question, (answer) => finish(answer.trim() === expected));
  });
}
