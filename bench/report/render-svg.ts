// The charts of a run: latest.svg (hand-off latency, and round trips and Redis commands per
// acquisition, a bar per contender and figure) and one chart per scaling curve (a small panel
// per metric, a line per contender, x on a log scale).
import type { Results } from '../results-model.js';
import { PEERS, metric } from './common.js';
import { CURVES, curveContenders, type Curve, type CurveMetric } from './curves.js';
import { escape, legend, linearAxis, logAxis, short, type Axis } from './svg.js';

const BAR_COLORS = ['#1f77b4', '#ff7f0e'];
const LINE_COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728'];
const color = (colors: readonly string[], i: number): string => colors[i % colors.length] ?? '#000';

/** "quick run, <date>" in a chart's bottom right corner. */
function stamp(results: Results, width: number, height: number): string {
  const text = `${results.env.quick ? 'quick run' : 'full run'}, ${results.env.date}`;
  return `<text x="${width - 10}" y="${height - 6}" font-size="9" text-anchor="end" fill="#666">${escape(text)}</text>`;
}

interface BarPanel {
  readonly title: string;
  /** Appended to each bar's value (' ms'); '' for counts. */
  readonly unit: string;
  readonly log: boolean;
  readonly series: readonly string[];
  readonly rows: readonly { readonly label: string; readonly values: readonly (number | undefined)[] }[];
}

/** Horizontal bars, a group per row (contender) and a bar per series, over one shared axis. */
function barPanel(p: BarPanel, top: number, width: number): { svg: string; height: number } {
  const left = 150;
  const barHeight = 10;
  const rowHeight = p.series.length * barHeight + 8;
  // Room on the right for the longest bar's value.
  const plotWidth = width - left - 80;
  const values = p.rows.flatMap((row) => row.values).filter((v): v is number => v !== undefined && v > 0);
  const axis: Axis = p.log
    ? logAxis(values.length === 0 ? 1 : Math.min(...values), values.length === 0 ? 10 : Math.max(...values))
    : linearAxis(values.length === 0 ? 1 : Math.max(...values));
  const parts = [`<text x="10" y="${top + 16}" font-size="14" font-weight="bold">${escape(p.title)}</text>`];
  const key = legend(
    p.series.map((label, i) => ({ label, color: color(BAR_COLORS, i) })),
    left,
    top + 24,
    width - 10,
    'box',
  );
  parts.push(key.svg);
  const rowsTop = top + 24 + key.height + 4;
  const axisY = rowsTop + p.rows.length * rowHeight + 4;
  // Grid lines first, so the bars are drawn over them.
  for (const tick of axis.ticks) {
    const tx = (left + axis.at(tick) * plotWidth).toFixed(1);
    parts.push(`<line x1="${tx}" y1="${rowsTop - 2}" x2="${tx}" y2="${axisY}" stroke="#eee"/>`);
  }
  p.rows.forEach((row, r) => {
    const y = rowsTop + r * rowHeight;
    parts.push(
      `<text x="${left - 6}" y="${y + rowHeight / 2}" font-size="11" text-anchor="end">${escape(row.label)}</text>`,
    );
    row.values.forEach((value, i) => {
      const by = y + i * barHeight;
      if (value === undefined || value <= 0) {
        parts.push(`<text x="${left + 4}" y="${by + 9}" font-size="9" fill="#888">n/a</text>`);
        return;
      }
      const w = Math.max(1, axis.at(value) * plotWidth);
      parts.push(
        `<rect x="${left}" y="${by}" width="${w.toFixed(1)}" height="${barHeight - 1}" fill="${color(BAR_COLORS, i)}"/>`,
        `<text x="${(left + w + 4).toFixed(1)}" y="${by + 9}" font-size="9">${escape(`${short(value)}${p.unit}`)}</text>`,
      );
    });
  });
  parts.push(`<line x1="${left}" y1="${axisY}" x2="${left + plotWidth}" y2="${axisY}" stroke="#444"/>`);
  for (const tick of axis.ticks) {
    const tx = (left + axis.at(tick) * plotWidth).toFixed(1);
    parts.push(
      `<line x1="${tx}" y1="${axisY}" x2="${tx}" y2="${axisY + 4}" stroke="#444"/>`,
      `<text x="${tx}" y="${axisY + 15}" font-size="9" text-anchor="middle">${axis.label(tick)}</text>`,
    );
  }
  const caption = p.unit.trim() === '' ? 'per acquisition' : `${p.unit.trim()}${p.log ? ' (log scale)' : ''}`;
  parts.push(
    `<text x="${left + plotWidth / 2}" y="${axisY + 28}" font-size="10" text-anchor="middle">${escape(caption)}</text>`,
  );
  return { svg: parts.join('\n'), height: axisY + 40 - top };
}

/** latest.svg: the hand-off latency of latchkey and its peers, and what an acquisition costs. */
export function renderSvg(results: Results): string {
  const width = 760;
  const contenders = ['latchkey', ...PEERS];
  const first = barPanel(
    {
      title: 'Handoff latency (release to waiter acquired)',
      unit: ' ms',
      log: true,
      series: ['p50', 'p99'],
      rows: contenders.map((label) => ({
        label,
        values: [metric(results, 'handoff', label, 'p50Ms'), metric(results, 'handoff', label, 'p99Ms')],
      })),
    },
    10,
    width,
  );
  const second = barPanel(
    {
      title: 'Per acquisition, 8 contenders on one key',
      unit: '',
      log: false,
      series: ['round trips (client requests)', 'Redis commands (incl. in scripts)'],
      rows: contenders.map((label) => ({
        label,
        values: [
          metric(results, 'contended-8', label, 'roundTripsPerAcq'),
          metric(results, 'contended-8', label, 'cmdsPerAcq'),
        ],
      })),
    },
    20 + first.height,
    width,
  );
  const height = 30 + first.height + second.height;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    first.svg,
    second.svg,
    stamp(results, width, height),
    '</svg>',
    '',
  ].join('\n');
}

const PANEL = { width: 350, height: 150 } as const;

/** One metric of a scaling curve: x on a log scale over the curve's points, a line per contender. */
function smallMultiple(
  results: Results,
  curve: Curve,
  metricOf: CurveMetric,
  contenders: readonly string[],
  left: number,
  top: number,
): string {
  const plot = { x: left + 56, y: top + 32, w: PANEL.width - 76, h: PANEL.height - 66 };
  const series = contenders.map((contender) =>
    curve.points
      .map((n) => [n, metric(results, curve.scenario(n), contender, metricOf.key)] as const)
      .filter((entry): entry is readonly [number, number] => entry[1] !== undefined && entry[1] >= 0),
  );
  const values = series.flat().map(([, v]) => v);
  const positive = values.filter((v) => v > 0);
  // A log scale for y when the values span more than two decades; linear from 0 otherwise.
  const log = positive.length > 0 && Math.max(...positive) / Math.min(...positive) > 100;
  const axis = log
    ? logAxis(Math.min(...positive), Math.max(...positive), 5)
    : linearAxis(values.length === 0 ? 1 : Math.max(...values), 4, true);
  // A log scale has no place for 0 (a contender with no subscription): such points get a line
  // of their own at the bottom, labelled 0, below the lowest decade.
  const zeroBand = log && values.some((v) => v === 0) ? 0.15 : 0;
  const at = (v: number): number => (zeroBand > 0 && v <= 0 ? 0 : zeroBand + (1 - zeroBand) * axis.at(v));
  const ticks = zeroBand > 0 ? [0, ...axis.ticks] : axis.ticks;
  const label = (tick: number): string => (zeroBand > 0 && tick === 0 ? '0' : axis.label(tick));
  const xLo = Math.log10(curve.points[0] ?? 1);
  const xHi = Math.log10(curve.points[curve.points.length - 1] ?? 10);
  const px = (n: number): number => plot.x + ((Math.log10(n) - xLo) / (xHi - xLo || 1)) * plot.w;
  const py = (v: number): number => plot.y + plot.h - at(v) * plot.h;
  const parts = [
    `<text x="${left + 10}" y="${top + 14}" font-size="12" font-weight="bold">${escape(metricOf.label)}${log ? ' (log)' : ''}</text>`,
    `<rect x="${plot.x}" y="${plot.y}" width="${plot.w}" height="${plot.h}" fill="none" stroke="#ccc"/>`,
  ];
  for (const tick of ticks) {
    const ty = py(tick).toFixed(1);
    parts.push(
      `<line x1="${plot.x}" y1="${ty}" x2="${plot.x + plot.w}" y2="${ty}" stroke="#eee"/>`,
      `<text x="${plot.x - 4}" y="${ty}" font-size="9" text-anchor="end" dominant-baseline="middle">${label(tick)}</text>`,
    );
  }
  for (const n of curve.points) {
    parts.push(
      `<text x="${px(n).toFixed(1)}" y="${plot.y + plot.h + 12}" font-size="9" text-anchor="middle">${n.toLocaleString('en-US')}</text>`,
    );
  }
  parts.push(
    `<text x="${plot.x + plot.w / 2}" y="${plot.y + plot.h + 25}" font-size="9" text-anchor="middle" fill="#555">${escape(curve.x)} (log scale)</text>`,
  );
  series.forEach((points, i) => {
    if (points.length > 1)
      parts.push(
        `<polyline fill="none" stroke="${color(LINE_COLORS, i)}" stroke-width="2" points="${points.map(([n, v]) => `${px(n).toFixed(1)},${py(v).toFixed(1)}`).join(' ')}"/>`,
      );
    for (const [n, v] of points)
      parts.push(
        `<circle cx="${px(n).toFixed(1)}" cy="${py(v).toFixed(1)}" r="3" fill="${color(LINE_COLORS, i)}"><title>${escape(`${contenders[i] ?? ''}: ${short(v)} at ${n.toLocaleString('en-US')}`)}</title></circle>`,
      );
  });
  if (values.length === 0)
    parts.push(
      `<text x="${plot.x + plot.w / 2}" y="${plot.y + plot.h / 2}" font-size="10" fill="#888" text-anchor="middle">not measured</text>`,
    );
  return parts.join('\n');
}

/** The chart of one scaling curve (a small panel per metric), or undefined if it was not measured. */
export function renderScalingSvg(results: Results, id: Curve['id']): string | undefined {
  const curve = CURVES.find((c) => c.id === id);
  if (curve === undefined) return undefined;
  const contenders = curveContenders(results, curve).filter((contender) =>
    curve.points.some((n) => results.scenarios[curve.scenario(n)]?.[contender] !== undefined),
  );
  if (contenders.length === 0) return undefined;
  const columns = 2;
  const width = columns * PANEL.width;
  const key = legend(
    contenders.map((label, i) => ({ label, color: color(LINE_COLORS, i) })),
    10,
    28,
    width - 10,
    'line',
  );
  const header = 28 + key.height + 6;
  const height = header + Math.ceil(curve.metrics.length / columns) * PANEL.height + 20;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">${escape(`Scaling: ${curve.title}`)}</text>`,
    key.svg,
  ];
  curve.metrics.forEach((metricOf, i) => {
    const left = (i % columns) * PANEL.width;
    const top = header + Math.floor(i / columns) * PANEL.height;
    parts.push(smallMultiple(results, curve, metricOf, contenders, left, top));
  });
  parts.push(stamp(results, width, height), '</svg>', '');
  return parts.join('\n');
}
