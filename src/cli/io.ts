/** Where a command reads and writes; the real process in main.ts, streams in unit tests. @internal */
export interface CliIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly stdin: NodeJS.ReadableStream;
  /** Whether stdin is a terminal a person can answer a question on. */
  readonly interactive: boolean;
  readonly env: NodeJS.ProcessEnv;
  /** Aborts on SIGINT or SIGTERM. */
  readonly interrupted: AbortSignal;
}
