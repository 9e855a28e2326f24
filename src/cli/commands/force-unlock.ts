import { LockClient } from '../../index.js';
import { lockKey } from '../../keys.js';
import { askToConfirm } from '../confirm.js';
import { CliError, ExitCode } from '../exit-codes.js';
import { plural } from '../format.js';
import { formatTtl, jsonLine, kindText } from '../render.js';
import { layoutOf } from '../layouts/index.js';
import { readSnapshot, summary, type LockKind, type Snapshot } from '../snapshot.js';
import type { CommandContext } from './context.js';

function question(before: Snapshot, effect: string): string {
  const holders =
    before.kind === 'simple-lock'
      ? 'held'
      : before.kind === 'permit-semaphore'
        ? `${plural(before.holders.length, 'permit', 'permits')} out`
        : `held by ${plural(before.holders.length, 'owner', 'owners')}`;
  const what = [
    holders,
    `ttl ${formatTtl(before)}`,
    ...(before.kind === 'simple-lock' || before.kind === 'permit-semaphore'
      ? []
      : [`${before.waiting} waiting`]),
  ].join(', ');
  const key = before.key === before.name ? '' : ` (key ${JSON.stringify(before.key)})`;
  return (
    `Force-unlock ${kindText(before)} ${JSON.stringify(before.name)}${key}: ${what}.\n` +
    `${effect}\n` +
    'Type the lock name to confirm: '
  );
}

/**
 * `latchkey force-unlock <name>`: frees the key whoever holds it, the way its kind frees it (its
 * layout's policy in src/cli/layouts): through the library's `forceUnlock()` of that kind, so a
 * queued waiter is handed the lock (with a new fencing token for a fenced lock), a fair queue
 * keeps its order, a read-write lock loses readers and writer, a permit semaphore gets its
 * permits back, and waiters are told. Kinds without holders to free — a semaphore, a latch, a
 * counter that may be either — are refused with what to do instead: deleting their counter would
 * let in more holders than the kind allows. Asks first unless `yes`.
 * @internal
 */
export async function forceUnlock(
  context: CommandContext,
  name: string,
  yes: boolean,
  kind?: LockKind,
): Promise<ExitCode> {
  const { io, redis, options, labels } = context;
  const key = lockKey(options.prefix, name);
  const read = (hint: LockKind | undefined): Promise<Snapshot> =>
    readSnapshot(redis, name, key, labels, { details: false, ...(hint === undefined ? {} : { hint }) });
  const before = await read(kind);
  const report = (unlocked: boolean, after: Snapshot | null): void => {
    if (options.json) {
      io.stdout.write(jsonLine({ name, key, kind: before.kind, unlocked, after: after && summary(after) }));
    }
  };
  const policy = layoutOf(before.kind).unlock;
  if (policy.action === 'refuse') {
    report(false, before.kind === 'not-a-lock' ? null : before);
    throw new CliError(policy.code, policy.reason(before));
  }
  if (!before.held) {
    report(false, before);
    throw new CliError(
      ExitCode.NO_LOCK,
      `Nothing to unlock: ${kindText(before)} ${JSON.stringify(name)} is free (${policy.nothingHeld}).`,
    );
  }
  if (!yes) {
    if (!io.interactive) {
      throw new CliError(
        ExitCode.REFUSED,
        `Refusing to force-unlock ${JSON.stringify(name)} without confirmation: stdin is not a terminal. Pass --yes to confirm.`,
      );
    }
    const confirmed = await askToConfirm(io, question(before, policy.effect), name);
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
    unlocked = await policy.handle(locks, name).forceUnlock();
  } finally {
    await locks.close();
  }
  // A permit semaphore with no permit out left is still one.
  const after = await read(before.kind);
  report(unlocked, after);
  if (!unlocked) {
    throw new CliError(
      ExitCode.NO_LOCK,
      `Nothing to unlock: ${kindText(before)} ${JSON.stringify(name)} was freed meanwhile.`,
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
