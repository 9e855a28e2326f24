import { isCompanionKey } from '../../keys.js';
import { ExitCode } from '../exit-codes.js';
import { jsonLine, listHeader, listRow } from '../render.js';
import { isPresent, readSnapshot, summary, type Snapshot } from '../snapshot.js';
import type { CommandContext } from './context.js';

/** The characters SCAN's MATCH gives a meaning to, escaped so a prefix matches as it is. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

function text(reply: unknown): string {
  return Buffer.isBuffer(reply) ? reply.toString('utf8') : String(reply);
}

/**
 * `latchkey list`: walks the keyspace with SCAN (MATCH prefix + pattern, TYPE hash, then TYPE
 * string with `--include-strings`) — never KEYS, which blocks the server — and prints each key
 * that holds one of the kinds (src/cli/layouts), as it is found: hashes are locks, fair locks
 * and read-write locks; strings are simple locks, semaphores, permit semaphores and latches.
 * @internal
 */
export async function list(
  context: CommandContext,
  pattern: string,
  includeStrings: boolean,
  scanCount: number,
): Promise<ExitCode> {
  const { io, redis, options, labels } = context;
  const match = escapeGlob(options.prefix) + pattern;
  const types = includeStrings ? ['hash', 'string'] : ['hash'];
  let found = 0;
  const print = (snapshot: Snapshot): void => {
    if (!options.json && found === 0) io.stdout.write(listHeader());
    found += 1;
    io.stdout.write(options.json ? jsonLine(summary(snapshot)) : listRow(snapshot));
  };
  for (const type of types) {
    let cursor = '0';
    do {
      const reply = await redis.send([
        'SCAN',
        cursor,
        'MATCH',
        match,
        'COUNT',
        String(scanCount),
        'TYPE',
        type,
      ]);
      const [next, batch] = Array.isArray(reply) ? (reply as unknown[]) : [];
      cursor = text(next);
      const keys = (Array.isArray(batch) ? batch : []).map(text).filter((key) => !isCompanionKey(key));
      // Read in parallel (node-redis pipelines them), print in SCAN's order.
      const snapshots = await Promise.all(
        keys.map((key) =>
          readSnapshot(redis, key.slice(options.prefix.length), key, labels, { details: false }),
        ),
      );
      // A key may have been freed (or changed) between SCAN and the read: only kinds are listed.
      for (const snapshot of snapshots) if (isPresent(snapshot)) print(snapshot);
    } while (cursor !== '0');
  }
  if (found === 0 && !options.json) {
    io.stderr.write(
      `No locks match ${JSON.stringify(match)}${includeStrings ? '' : ' (hashes only; --include-strings for simple locks, semaphores and latches)'}.\n`,
    );
  }
  return ExitCode.OK;
}
