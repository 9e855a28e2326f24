import { formatMs, more, row } from '../format.js';
import type { Holder, HolderLabels, Snapshot, Waiter } from '../model.js';

/** `<uuid>:<n>`: latchkey's `<clientId>:<ownerId>`, Redisson's `<uuid>:<threadId>`. @internal */
export const OWNER_FIELD = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:\d+$/i;
/** @internal */
export const HOLD_COUNT = /^[1-9]\d*$/;

/** A hash's owners, when every field is an owner field with a hold count; else undefined. @internal */
export function ownersOf(
  fields: readonly [string, string][] | undefined,
  labels: HolderLabels | undefined,
): Holder[] | undefined {
  if (fields === undefined || fields.length === 0) return undefined;
  const holders: Holder[] = [];
  for (const [field, count] of fields) {
    if (!OWNER_FIELD.test(field) || !HOLD_COUNT.test(count)) return undefined;
    holders.push({
      label: labels?.label(field) ?? null,
      holdCount: Number(count),
      role: 'owner',
      leaseMs: null,
    });
  }
  return holders;
}

/** `850 ms`; `no expiry` for a key without TTL; `-` for a snapshot with nothing there. @internal */
export function ttlText(snapshot: Pick<Snapshot, 'ttlMs' | 'kind'>): string {
  if (snapshot.ttlMs !== null) return formatMs(snapshot.ttlMs);
  return snapshot.kind === 'free' ? '-' : 'no expiry';
}

function leaseText(holder: Holder): string {
  return holder.leaseMs === null ? '' : `  lease ${formatMs(holder.leaseMs)}`;
}

/** One holder, indented under `holders`. @internal */
export function holderRow(holder: Holder): string {
  switch (holder.role) {
    case 'token':
      return '  held (the token is not shown)';
    case 'owner':
      return `  ${holder.label ?? '?'}  hold count ${holder.holdCount}`;
    case 'reader':
    case 'writer':
      return `  ${holder.label ?? '?'}  ${holder.role}  hold count ${holder.holdCount}${leaseText(holder)}`;
    case 'permit':
      return `  ${holder.label ?? '?'}  permit${holder.leaseMs === null ? '  lease never ends' : leaseText(holder)}`;
  }
}

/** A holder in a `watch` line: `3fa2b1c9×2`, `3fa2b1c9 writer×1`, `held`. @internal */
export function holderWord(holder: Holder): string {
  if (holder.label === null) return 'held';
  return holder.role === 'reader' || holder.role === 'writer'
    ? `${holder.label} ${holder.role}×${holder.holdCount}`
    : `${holder.label}×${holder.holdCount}`;
}

/** `holders` and one row each, then `ttl`. @internal */
export function holderRows(snapshot: Snapshot): string[] {
  return [
    row('holders', String(snapshot.holders.length)),
    ...snapshot.holders.map(holderRow),
    row('ttl', ttlText(snapshot)),
  ];
}

function waiterRow(waiter: Waiter): string {
  let what: string;
  if (waiter.deadlineMs !== null) {
    what =
      waiter.deadlineMs > 0
        ? `keeps its place for ${formatMs(waiter.deadlineMs)}`
        : 'its place lapsed (dropped by the next call)';
  } else {
    what = waiter.leaseMs === null ? 'unreadable entry' : `lease ${waiter.leaseMs} ms`;
  }
  const listening =
    waiter.listening === null ? '' : waiter.listening ? '  listening' : '  not listening (will be skipped)';
  return `  ${String(waiter.position).padStart(3)}  ${what}${listening}`;
}

/** `waiting` (or another label) and one row per waiter read. @internal */
export function waiterRows(snapshot: Snapshot, label = 'waiting'): string[] {
  const rows = [row(label, String(snapshot.waiting)), ...snapshot.waiters.map(waiterRow)];
  if (snapshot.waiting > snapshot.waiters.length && snapshot.waiters.length > 0) {
    rows.push(more(`... and ${snapshot.waiting - snapshot.waiters.length} more`));
  }
  return rows;
}

/** `holders 3fa2b1c9×1, ...` and `ttl ...` for a `watch` line, when held. @internal */
export function holderParts(snapshot: Snapshot): string[] {
  return snapshot.held
    ? [`holders ${snapshot.holders.map(holderWord).join(', ')}`, `ttl ${ttlText(snapshot)}`]
    : [];
}

/** PUBSUB NUMSUB's answer for `channels`: how many listen on each. @internal */
export function numsub(reply: unknown): Map<string, number> {
  const flat = Array.isArray(reply) ? (reply as unknown[]) : [];
  const counts = new Map<string, number>();
  for (let i = 0; i + 1 < flat.length; i += 2) counts.set(String(flat[i]), Number(flat[i + 1]));
  return counts;
}
