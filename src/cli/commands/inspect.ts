import { lockKey } from '../../keys.js';
import { ExitCode } from '../exit-codes.js';
import { jsonLine, renderInspect } from '../render.js';
import { isPresent, readSnapshot, type LockKind } from '../snapshot.js';
import type { CommandContext } from './context.js';

/**
 * `latchkey inspect <name>`: what the key holds, told by its layout (src/cli/layouts): the kind,
 * holders and hold counts, TTL, mode, permits, count, fencing token and queued waiters. Exits
 * {@link ExitCode.NO_LOCK} when there is nothing there (or the key holds no kind).
 * @internal
 */
export async function inspect(context: CommandContext, name: string, kind?: LockKind): Promise<ExitCode> {
  const { io, redis, options, labels } = context;
  const snapshot = await readSnapshot(redis, name, lockKey(options.prefix, name), labels, {
    details: true,
    ...(kind === undefined ? {} : { hint: kind }),
  });
  io.stdout.write(options.json ? jsonLine(snapshot) : renderInspect(snapshot));
  return isPresent(snapshot) ? ExitCode.OK : ExitCode.NO_LOCK;
}
