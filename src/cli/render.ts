import { row } from './format.js';
import { ttlText } from './layouts/common.js';
import { kindText, layoutOf } from './layouts/index.js';
import type { Snapshot } from './snapshot.js';

export { kindText } from './layouts/index.js';
export { ttlText as formatTtl } from './layouts/common.js';

/** `inspect`'s text: one "label value" row per line, holders and waiters indented below. @internal */
export function renderInspect(snapshot: Snapshot): string {
  const rows = [row('name', snapshot.name)];
  if (snapshot.key !== snapshot.name) rows.push(row('key', snapshot.key));
  rows.push(row('kind', kindText(snapshot)), ...layoutOf(snapshot.kind).rows(snapshot));
  return `${rows.join('\n')}\n`;
}

const LIST_COLUMNS = ['KIND', 'HOLDERS', 'TTL', 'WAITING', 'COUNT'] as const;
const LIST_WIDTHS = [21, 9, 13, 9, 7] as const;

/** `list`'s header line. @internal */
export function listHeader(): string {
  return `${LIST_COLUMNS.map((title, i) => title.padEnd(LIST_WIDTHS[i] ?? 0)).join('')}NAME\n`;
}

/** A counter's kind in a table cell: the long title does not fit. */
function listKind(snapshot: Snapshot): string {
  return snapshot.kind === 'counter' ? 'counter (ambiguous)' : kindText(snapshot);
}

/**
 * One key in `list`'s table. COUNT is a semaphore's free permits, a latch's count or a counter's
 * value. @internal
 */
export function listRow(snapshot: Snapshot): string {
  const cells = layoutOf(snapshot.kind).cells(snapshot);
  const waits = snapshot.waiting > 0 || snapshot.kind.endsWith('lock');
  const values = [
    listKind(snapshot),
    cells.holders,
    snapshot.kind === 'free' ? '-' : ttlText(snapshot),
    waits ? String(snapshot.waiting) : '-',
    cells.count,
  ];
  return `${values.map((cell, i) => `${cell} `.padEnd(LIST_WIDTHS[i] ?? 0)).join('')}${snapshot.name}\n`;
}

/** The local time of day, `HH:MM:SS.mmm`. */
function timeOfDay(date: Date): string {
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${String(date.getMilliseconds()).padStart(3, '0')}`;
}

/** One line of `watch`'s text output. @internal */
export function watchLine(snapshot: Snapshot, at: Date): string {
  return `${[timeOfDay(at), kindText(snapshot), ...layoutOf(snapshot.kind).parts(snapshot)].join('  ')}\n`;
}

/** One JSON value on one line. @internal */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}
