/** `850 ms`, `28.7 s`, `4 min 12 s`: a span of time as an operator reads it. @internal */
export function formatMs(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const seconds = Math.floor(ms / 1_000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/** One "label value" row of `inspect`, the values aligned. @internal */
export function row(label: string, value: string): string {
  return `${label.padEnd(9)}${value}`;
}

/** A row's continuation: text under the value column. @internal */
export function more(text: string): string {
  return `${' '.repeat(9)}${text}`;
}

/** `1 owner`, `2 owners`. @internal */
export function plural(count: number, one: string, many: string): string {
  return `${count} ${count === 1 ? one : many}`;
}
