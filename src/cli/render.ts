import type { Holder, Snapshot } from './snapshot.js';

/** `850 ms`, `28.7 s`, `4 min 12 s`; `no expiry` for a held key without TTL, `-` for none. @internal */
export function formatTtl(snapshot: Pick<Snapshot, 'ttlMs' | 'held' | 'kind'>): string {
  const { ttlMs } = snapshot;
  if (ttlMs === null) return snapshot.kind === 'free' ? '-' : 'no expiry';
  if (ttlMs < 1_000) return `${ttlMs} ms`;
  if (ttlMs < 60_000) return `${(ttlMs / 1_000).toFixed(1)} s`;
  const seconds = Math.floor(ttlMs / 1_000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/** @internal */
export function kindText(snapshot: Pick<Snapshot, 'kind' | 'redisType'>): string {
  switch (snapshot.kind) {
    case 'lock':
      return 'lock';
    case 'fenced-lock':
      return 'lock (fenced)';
    case 'simple-lock':
      return 'simple lock';
    case 'free':
      return 'free';
    case 'not-a-lock':
      return `not a lock (a ${snapshot.redisType})`;
  }
}

function holderText(holder: Holder): string {
  return holder.label === null ? 'held' : `${holder.label}×${holder.holdCount}`;
}

/** `inspect`'s text: one "label value" row per line, holders and waiters indented below. @internal */
export function renderInspect(snapshot: Snapshot): string {
  const rows: string[] = [];
  const row = (label: string, value: string): void => {
    rows.push(`${label.padEnd(9)}${value}`);
  };
  row('name', snapshot.name);
  if (snapshot.key !== snapshot.name) row('key', snapshot.key);
  row('kind', kindText(snapshot));
  if (snapshot.kind === 'not-a-lock') {
    rows.push(
      snapshot.redisType === 'hash'
        ? '         its fields are not owner fields (<uuid>:<n> -> hold count)'
        : '         latchkey locks are hashes (lock, fenced lock) or strings (simple lock)',
    );
  }
  if (snapshot.fencingToken !== null) {
    row('token', snapshot.held ? snapshot.fencingToken : `${snapshot.fencingToken} (last issued)`);
  }
  if (snapshot.held) {
    row('holders', String(snapshot.holders.length));
    for (const holder of snapshot.holders) {
      rows.push(
        holder.label === null
          ? '  held (the token is not shown)'
          : `  ${holder.label}  hold count ${holder.holdCount}`,
      );
    }
    row('ttl', formatTtl(snapshot));
  }
  if (snapshot.kind !== 'simple-lock' || snapshot.waiting > 0) {
    row('waiting', String(snapshot.waiting));
    for (const waiter of snapshot.waiters) {
      const lease = waiter.leaseMs === null ? 'unreadable entry' : `lease ${waiter.leaseMs} ms`;
      const listening =
        waiter.listening === null
          ? ''
          : waiter.listening
            ? '  listening'
            : '  not listening (will be skipped)';
      rows.push(`  ${String(waiter.position).padStart(3)}  ${lease}${listening}`);
    }
    if (snapshot.waiting > snapshot.waiters.length && snapshot.waiters.length > 0) {
      rows.push(`  ... and ${snapshot.waiting - snapshot.waiters.length} more`);
    }
  }
  return `${rows.join('\n')}\n`;
}

const LIST_COLUMNS = ['KIND', 'HOLDERS', 'TTL', 'WAITING'] as const;
const LIST_WIDTHS = [15, 9, 13, 9] as const;

/** `list`'s header line. @internal */
export function listHeader(): string {
  return `${LIST_COLUMNS.map((title, i) => title.padEnd(LIST_WIDTHS[i] ?? 0)).join('')}NAME\n`;
}

/** One lock in `list`'s table. @internal */
export function listRow(snapshot: Snapshot): string {
  const cells = [
    kindText(snapshot),
    snapshot.held ? String(snapshot.holders.length) : '-',
    formatTtl(snapshot),
    String(snapshot.waiting),
  ];
  return `${cells.map((cell, i) => `${cell} `.padEnd(LIST_WIDTHS[i] ?? 0)).join('')}${snapshot.name}\n`;
}

/** The local time of day, `HH:MM:SS.mmm`. */
function timeOfDay(date: Date): string {
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${String(date.getMilliseconds()).padStart(3, '0')}`;
}

/** One line of `watch`'s text output. @internal */
export function watchLine(snapshot: Snapshot, at: Date): string {
  const parts = [timeOfDay(at), kindText(snapshot)];
  if (snapshot.held) {
    parts.push(`holders ${snapshot.holders.map(holderText).join(', ')}`, `ttl ${formatTtl(snapshot)}`);
  }
  if (snapshot.fencingToken !== null) parts.push(`token ${snapshot.fencingToken}`);
  if (snapshot.kind !== 'simple-lock' || snapshot.waiting > 0) parts.push(`waiting ${snapshot.waiting}`);
  return `${parts.join('  ')}\n`;
}

/** One JSON value on one line. @internal */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}
