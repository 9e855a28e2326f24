// The pieces the charts are drawn with: axes whose ticks fall on round numbers, labels without
// spurious decimals, and legends laid out by the length of their labels. Plain SVG text, no
// chart library.

export function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A number with at most `decimals` decimals and thousands separators: 0, 0.5, 20, 1,000. */
function plain(value: number, decimals: number): string {
  return value.toLocaleString('en-US', { maximumFractionDigits: decimals, useGrouping: true });
}

/** A measured value beside a bar or a point: three significant digits, whole numbers from 100. */
export function short(value: number): string {
  if (Math.abs(value) >= 100) return plain(Math.round(value), 0);
  if (value === 0) return '0';
  const digits = Number(value.toPrecision(3));
  // Enough decimals for three significant digits of a value below 1 (0.000123).
  return plain(digits, Math.max(0, 2 - Math.floor(Math.log10(Math.abs(digits)))));
}

export interface Axis {
  readonly log: boolean;
  /** Tick values, from the axis's start to its end. */
  readonly ticks: readonly number[];
  /** Where a value falls between the axis's ends, 0 to 1 (clamped). */
  readonly at: (value: number) => number;
  /** A tick's text, with no more decimals than the step between ticks has. */
  readonly label: (tick: number) => string;
}

const clamp = (fraction: number): number => Math.min(1, Math.max(0, fraction));

/** Decimals a step of 10^k needs: none from 1 up, one for 0.5, two for 0.02. */
const decimalsOf = (step: number): number => Math.max(0, -Math.floor(Math.log10(step) + 1e-9));

/**
 * A linear axis from 0 whose ticks are 1, 2 or 5 x 10^k apart, about `intervals` of them, and
 * which ends at the first tick at or above `max` (14.06 gets 0, 5, 10, 15); with `above`, at the
 * first tick above it, so that no point is drawn on the plot's top edge.
 */
export function linearAxis(max: number, intervals = 5, above = false): Axis {
  const top = max > 0 && Number.isFinite(max) ? max : 1;
  const rough = top / intervals;
  const decade = 10 ** Math.floor(Math.log10(rough));
  const step = ([1, 2, 5].find((m) => m * decade >= rough * (1 - 1e-9)) ?? 10) * decade;
  const decimals = decimalsOf(step);
  const count = Math.max(1, above ? Math.floor(top / step + 1e-9) + 1 : Math.ceil(top / step - 1e-9));
  const ticks = Array.from({ length: count + 1 }, (_, i) => Number((i * step).toFixed(decimals)));
  const end = count * step;
  return {
    log: false,
    ticks,
    at: (value) => clamp(value / end),
    label: (tick) => plain(tick, decimals),
  };
}

/**
 * A log axis over whole decades around [min, max] (both > 0): a tick on each power of ten, or on
 * every second or third one where more than `most` ticks would crowd the axis.
 */
export function logAxis(min: number, max: number, most = 8): Axis {
  const first = Math.floor(Math.log10(min));
  const top = Math.max(first + 1, Math.ceil(Math.log10(max)));
  const step = Math.ceil((top - first) / Math.max(1, most - 1));
  const last = first + step * Math.ceil((top - first) / step);
  const ticks = Array.from({ length: (last - first) / step + 1 }, (_, i) => 10 ** (first + i * step));
  return {
    log: true,
    ticks,
    at: (value) => clamp((Math.log10(Math.max(value, 10 ** first)) - first) / (last - first)),
    label: (tick) => plain(tick, decimalsOf(tick)),
  };
}

/**
 * Roughly how wide a text is in px. A hand-written SVG has no font metrics: this errs on the
 * wide side for the sans-serif fonts browsers and renderers pick, so laid-out labels never touch.
 */
export function textWidth(text: string, fontSize: number): number {
  return text.length * fontSize * 0.62;
}

export interface LegendItem {
  readonly label: string;
  readonly color: string;
}

const LEGEND_FONT = 11;
const LEGEND_ROW = 16;

/**
 * A legend from (`left`, `top`), each item a swatch (a square for bars, a short line for
 * curves) and its label, placed after the previous item's label and wrapped onto a new row where
 * the next would pass `right`. Returns the SVG and the height it takes.
 */
export function legend(
  items: readonly LegendItem[],
  left: number,
  top: number,
  right: number,
  swatch: 'box' | 'line',
): { readonly svg: string; readonly height: number } {
  const swatchWidth = swatch === 'box' ? 10 : 18;
  const parts: string[] = [];
  let x = left;
  let row = 0;
  for (const item of items) {
    const width = swatchWidth + 4 + textWidth(item.label, LEGEND_FONT);
    if (x > left && x + width > right) {
      x = left;
      row += 1;
    }
    const y = top + row * LEGEND_ROW;
    parts.push(
      swatch === 'box'
        ? `<rect x="${x}" y="${y}" width="10" height="10" fill="${item.color}"/>`
        : `<rect x="${x}" y="${y + 3}" width="18" height="4" fill="${item.color}"/>`,
      `<text x="${x + swatchWidth + 4}" y="${y + 9}" font-size="${LEGEND_FONT}">${escape(item.label)}</text>`,
    );
    x = Math.ceil(x + width + 18);
  }
  return { svg: parts.join('\n'), height: (row + 1) * LEGEND_ROW };
}
