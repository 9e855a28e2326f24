// Writes a run's report beside its results: latest.md, latest.svg and a chart per scaling
// curve that was measured. `npm run bench` calls it after a run; `npm run render` (bench/render.ts)
// calls it on the latest.json of an earlier run.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Results } from '../results-model.js';
import { renderMarkdown } from './render-md.js';
import { renderScalingSvg, renderSvg } from './render-svg.js';

/** Writes the report of `results` into `out`; returns the paths written. */
export function writeReport(results: Results, out: string): string[] {
  mkdirSync(out, { recursive: true });
  const files: [string, string][] = [
    ['latest.md', renderMarkdown(results)],
    ['latest.svg', renderSvg(results)],
  ];
  for (const curve of ['contenders', 'keys'] as const) {
    const svg = renderScalingSvg(results, curve);
    if (svg !== undefined) files.push([`scaling-${curve}.svg`, svg]);
  }
  return files.map(([name, text]) => {
    const path = join(out, name);
    writeFileSync(path, text);
    return path;
  });
}
