// What the Markdown report, the charts and the targets share: the peers, reading one metric of
// a run, and the formats of numbers, ratios and durations in the report's text.
import type { Results } from '../results-model.js';
import type { ProfileTopic } from './profile-causes.js';

/** The peer libraries, each measured as a lock beside latchkey. */
export const PEERS = [
  'redlock',
  'sesame-redlock',
  'redis-semaphore',
  'node-redisson',
  'simple-redis-mutex',
] as const;

/** A scenario's metric for a contender, or undefined when that pair was not measured. */
export function metric(
  results: Results,
  scenario: string,
  contender: string,
  name: string,
): number | undefined {
  return results.scenarios[scenario]?.[contender]?.[name];
}

/** A table cell: integers as they are, 1 decimal from 100, 3 from 1, 4 below; '–' when unmeasured. */
export function fmt(value: number | undefined): string {
  if (value === undefined) return '–';
  if (Number.isInteger(value)) return String(value);
  const abs = Math.abs(value);
  return abs >= 100 ? value.toFixed(1) : abs >= 1 ? value.toFixed(3) : value.toFixed(4);
}

/** a / b, or undefined when either is unmeasured or b is 0. */
export function ratio(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined || b === 0 ? undefined : a / b;
}

/** A ratio as "1.23x", or 'n/a'. */
export function x(value: number | undefined): string {
  return value === undefined ? 'n/a' : `${value.toFixed(2)}x`;
}

/** A number of a detail, or 'n/a' when it was not measured. */
export function num(value: number | undefined): string {
  return value === undefined ? 'n/a' : fmt(value);
}

/** A duration of a detail in ms, or 'n/a' when it was not measured. */
export function ms(value: number | undefined): string {
  return value === undefined ? 'n/a' : `${fmt(value)} ms`;
}

/** A target's outcome: 'n/a' when a figure it needs was not measured in the run. */
export type Verdict = {
  readonly target: string;
  readonly status: 'pass' | 'miss' | 'n/a';
  readonly detail: string;
  /** What a profile run (bench/results/profile.json) says of this target, when it is missed. */
  readonly about?: ProfileTopic;
};

export function verdict(
  target: string,
  ok: boolean | undefined,
  detail: string,
  about?: ProfileTopic,
): Verdict {
  const status = ok === undefined ? 'n/a' : ok ? 'pass' : 'miss';
  return about === undefined ? { target, status, detail } : { target, status, detail, about };
}

/** All parts hold: false as soon as one is known false, undefined while one is unknown. */
export function all(...parts: (boolean | undefined)[]): boolean | undefined {
  if (parts.includes(false)) return false;
  return parts.includes(undefined) ? undefined : true;
}
