import type { CommonOptions } from '../args.js';
import type { Connection } from '../connection.js';
import type { CliIo } from '../io.js';
import type { HolderLabels } from '../snapshot.js';

/** What every command runs with. @internal */
export interface CommandContext {
  readonly io: CliIo;
  readonly redis: Connection;
  readonly options: CommonOptions;
  readonly labels: HolderLabels;
}
