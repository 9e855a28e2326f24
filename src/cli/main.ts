/**
 * The `latchkey` operator command: `npx latchkey --help`. Built into dist/cli.js; run from the
 * sources with `npx tsx src/cli/main.ts`.
 */
import { isatty } from 'node:tty';
import { ExitCode } from './exit-codes.js';
import { runCli } from './run.js';

const interrupted = new AbortController();
const onSignal = (): void => {
  // A second Ctrl-C ends the process whatever it is doing.
  if (interrupted.signal.aborted) process.exit(ExitCode.INTERRUPTED);
  interrupted.abort();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

const code = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  // Read lazily: only force-unlock's question touches stdin.
  get stdin() {
    return process.stdin;
  },
  interactive: isatty(0),
  env: process.env,
  interrupted: interrupted.signal,
});
process.exitCode = code;
process.off('SIGINT', onSignal);
process.off('SIGTERM', onSignal);
// Everything is closed by now; should a socket linger anyway, it must not keep the command alive.
setTimeout(() => process.exit(code), 1_000).unref();
