// Writes a run's report beside its results: latest.md, latest.svg and a chart per scaling
// curve that was measured; and a profile run's profile.md. `npm run bench` and `npm run
// bench:profile` call it after a run; `npm run render` (bench/render.ts) calls it on the
// latest.json and profile.json of earlier runs. latest.md's targets quote profile.json when it is
// there, so writing a profile renders latest.md again.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ProfileResults } from '../profile/model.js';
import type { Results } from '../results-model.js';
import { renderProfile } from './render-profile.js';
import { renderMarkdown } from './render-md.js';
import { renderScalingSvg, renderSvg } from './render-svg.js';

function write(out: string, files: readonly (readonly [string, string])[]): string[] {
  mkdirSync(out, { recursive: true });
  return files.map(([name, text]) => {
    const path = join(out, name);
    writeFileSync(path, text);
    return path;
  });
}

/** The results file `name` (latest.json, profile.json) in `out`, or undefined when there is none. */
function read<T>(out: string, name: string): T | undefined {
  const path = join(out, name);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as T) : undefined;
}

/** Writes the report of `results` into `out`; returns the paths written. */
export function writeReport(results: Results, out: string): string[] {
  const files: [string, string][] = [
    ['latest.md', renderMarkdown(results, read<ProfileResults>(out, 'profile.json'))],
    ['latest.svg', renderSvg(results)],
  ];
  for (const curve of ['contenders', 'keys'] as const) {
    const svg = renderScalingSvg(results, curve);
    if (svg !== undefined) files.push([`scaling-${curve}.svg`, svg]);
  }
  return write(out, files);
}

/** Writes profile.md from the profile.json in `out`, when there is one; returns the paths written. */
export function writeProfileMarkdown(out: string): string[] {
  const profile = read<ProfileResults>(out, 'profile.json');
  return profile === undefined ? [] : write(out, [['profile.md', renderProfile(profile)]]);
}

/**
 * Writes a profile run's results and report into `out`, and latest.md again from the
 * latest.json there, if any; returns the paths written.
 */
export function writeProfileReport(profile: ProfileResults, out: string): string[] {
  const paths = write(out, [
    ['profile.json', `${JSON.stringify(profile, null, 2)}\n`],
    ['profile.md', renderProfile(profile)],
  ]);
  const results = read<Results>(out, 'latest.json');
  if (results !== undefined) paths.push(...write(out, [['latest.md', renderMarkdown(results, profile)]]));
  return paths;
}
