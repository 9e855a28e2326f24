import { LockClient } from '../../index.js';
import { lockKey } from '../../keys.js';
import { askToConfirm } from '../confirm.js';
import { CliError, ExitCode } from '../exit-codes.js';
import { formatTtl, jsonLine, kindText } from '../render.js';
import { readSnapshot, summary, type Snapshot } from '../snapshot.js';
import type { CommandContext } from './context.js';

function plural(count: number, one: string, many: string): string {
  return `${count} ${count === 1 ? one : many}`;
}

function question(before: Snapshot): string {
  const what = [
    before.kind === 'simple-lock' ? 'held' : `held by ${plural(before.holders.length, 'owner', 'owners')}`,
    `ttl ${formatTtl(before)}`,
    ...(before.kind === 'simple-lock' ? [] : [`${before.waiting} waiting`]),
  ].join(', ');
  const key = before.key === before.name ? '' : ` (key ${JSON.stringify(before.key)})`;
  return (
    `Force-unlock ${kindText(before)} ${JSON.stringify(before.name)}${key}: ${what}.\n` +
    'Its holders lose it (a latchkey holder notices at its next renewal or when its lease ends), and the next waiter gets it.\n' +
    'Type the lock name to confirm: '
  );
}

/**
 * `latchkey force-unlock <name>`: deletes the lock whoever holds it, through the library's
 * `forceUnlock()` of its kind, so a queued waiter is handed it (with a new fencing token for a
 * fenced lock) or waiters are told it is free. Asks first unless `yes`.
 * @internal
 */
export async function forceUnlock(context: CommandContext, name: string, yes: boolean): Promise<ExitCode> {
  const { io, redis, options, labels } = context;
  const key = lockKey(options.prefix, name);
  const before = await readSnapshot(redis, name, key, labels, false);
  const report = (unlocked: boolean, after: Snapshot | null): void => {
    if (options.json) {
      io.stdout.write(jsonLine({ name, key, kind: before.kind, unlocked, after: after && summary(after) }));
    }
  };
  if (before.kind === 'not-a-lock') {
    report(false, null);
    throw new CliError(
      ExitCode.NO_LOCK,
      `Not force-unlocking ${JSON.stringify(key)}: it holds ${kindText(before).replace('not a lock ', '')}, which is not a lock.`,
    );
  }
  if (!before.held) {
    report(false, before);
    throw new CliError(
      ExitCode.NO_LOCK,
      `Nothing to unlock: lock ${JSON.stringify(name)} is free (no key ${JSON.stringify(key)}).`,
    );
  }
  if (!yes) {
    if (!io.interactive) {
      throw new CliError(
        ExitCode.REFUSED,
        `Refusing to force-unlock ${JSON.stringify(name)} without confirmation: stdin is not a terminal. Pass --yes to confirm.`,
      );
    }
    const confirmed = await askToConfirm(io, question(before), name);
    if (io.interrupted.aborted)
      throw new CliError(ExitCode.INTERRUPTED, 'Interrupted; the lock was not touched.');
    if (!confirmed) throw new CliError(ExitCode.REFUSED, 'Not confirmed; the lock was not touched.');
  }

  const locks = new LockClient(redis.lockRedis, {
    keyPrefix: options.prefix,
    commandTimeoutMs: options.timeoutMs,
  });
  // Nothing in the background here; a stray error must not crash the command.
  locks.on('error', () => undefined);
  let unlocked: boolean;
  try {
    const handle =
      before.kind === 'fenced-lock'
        ? locks.fencedLock(name)
        : before.kind === 'lock'
          ? locks.lock(name)
          : locks.simpleLock(name);
    unlocked = await handle.forceUnlock();
  } finally {
    await locks.close();
  }
  const after = await readSnapshot(redis, name, key, labels, false);
  report(unlocked, after);
  if (!unlocked) {
    throw new CliError(
      ExitCode.NO_LOCK,
      `Nothing to unlock: lock ${JSON.stringify(name)} was freed meanwhile.`,
    );
  }
  if (!options.json) {
    const now = after.held
      ? `It is held again, by ${after.holders.map((holder) => holder.label ?? 'a new token').join(', ')}: handed to the next waiter, or taken since.`
      : 'It is free now.';
    io.stdout.write(`Force-unlocked ${kindText(before)} ${JSON.stringify(name)}. ${now}\n`);
  }
  return ExitCode.OK;
}
