/**
 * Runs once before any test file (vitest `globalSetup`): checks whether Redis can be had, and
 * if not, prints how to get it, once. The run goes on, so tests that need no Redis (test/unit)
 * still run and pass; each file that needs Redis then fails with one line pointing back here,
 * rather than every file printing the same guidance.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUNDLES_ENV, buildBundles } from './bundles.js';
import { markGuidanceShown, redisAvailability } from './redis-server.js';

/** This run's bundles of the programs tests start (see bundles.ts), removed at the end. */
const BUNDLES_DIR = join(fileURLToPath(new URL('../../.tmp/', import.meta.url)), `bundles-${process.pid}`);

export async function setup(): Promise<() => void> {
  await buildBundles(BUNDLES_DIR);
  process.env[BUNDLES_ENV] = BUNDLES_DIR;
  const availability = await redisAvailability();
  if (!availability.ok) {
    console.error(`\n${availability.message}\nTest files that need Redis will fail; the others still run.\n`);
    markGuidanceShown('none');
  } else if (availability.note !== undefined) {
    console.warn(`\n${availability.note}\n`);
    markGuidanceShown('no-own-server');
  }
  return () => rmSync(BUNDLES_DIR, { recursive: true, force: true });
}
