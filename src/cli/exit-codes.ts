/**
 * The exit codes of the `latchkey` command, as `latchkey --help` and docs/operations.md list them.
 * @internal
 */
export const ExitCode = {
  /** The command did what was asked. */
  OK: 0,
  /** No lock at that key: it is free, or the key holds something that is not a lock. */
  NO_LOCK: 1,
  /** Bad usage: an unknown command or option, a missing name, a value out of range. */
  USAGE: 2,
  /** Redis could not be reached, did not answer in time, or answered with an error. */
  REDIS: 3,
  /** A force-unlock was not confirmed (or could not be, with no terminal and no `--yes`). */
  REFUSED: 4,
  /** A bug in the CLI itself: it printed the stack; please report it. */
  INTERNAL: 70,
  /** Interrupted (Ctrl-C) before the command finished; `watch` stops with 0 instead. */
  INTERRUPTED: 130,
} as const;

/** @internal */
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/**
 * An error that ends the command with `code` and prints `message` (one line, no stack).
 * @internal
 */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly code: ExitCode;

  constructor(code: ExitCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
