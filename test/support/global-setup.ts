/**
 * Runs once before any test file (vitest `globalSetup`): checks whether Redis can be had, and
 * if not, prints how to get it, once. The run goes on, so tests that need no Redis (test/unit)
 * still run and pass; each file that needs Redis then fails with one line pointing back here,
 * rather than every file printing the same guidance.
 */
import { markGuidanceShown, redisAvailability } from './redis-server.js';

export async function setup(): Promise<void> {
  const availability = await redisAvailability();
  if (!availability.ok) {
    console.error(`\n${availability.message}\nTest files that need Redis will fail; the others still run.\n`);
    markGuidanceShown('none');
  } else if (availability.note !== undefined) {
    console.warn(`\n${availability.note}\n`);
    markGuidanceShown('no-own-server');
  }
}
