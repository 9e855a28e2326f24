import { lockKey } from '../../keys.js';
import { ExitCode } from '../exit-codes.js';
import { jsonLine, renderInspect } from '../render.js';
import { readSnapshot } from '../snapshot.js';
import type { CommandContext } from './context.js';

/**
 * `latchkey inspect <name>`: the lock's kind, holders, TTL, fencing token and queued waiters.
 * Exits {@link ExitCode.NO_LOCK} when nothing holds the lock (or the key is no lock).
 * @internal
 */
export async function inspect(context: CommandContext, name: string): Promise<ExitCode> {
  const { io, redis, options, labels } = context;
  const snapshot = await readSnapshot(redis, name, lockKey(options.prefix, name), labels, true);
  io.stdout.write(options.json ? jsonLine(snapshot) : renderInspect(snapshot));
  return snapshot.held ? ExitCode.OK : ExitCode.NO_LOCK;
}
