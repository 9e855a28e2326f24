/**
 * Runs once before any test file (vitest `globalSetup`): checks that Redis can be had at all,
 * so that a machine without it gets one message and no test file runs, rather than the same
 * guidance from every file that starts a server.
 */
import { markGuidanceShown, redisAvailability } from './redis-server.js';

export async function setup(): Promise<void> {
  const availability = await redisAvailability();
  if (!availability.ok) {
    // Exiting here rather than throwing: vitest would add a stack trace and a misleading
    // "No test files found" to the one message that matters.
    console.error(`\n${availability.message}\n`);
    process.exit(1);
  }
  if (availability.note !== undefined) {
    console.warn(`\n${availability.note}\n`);
    markGuidanceShown();
  }
}
