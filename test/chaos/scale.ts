/**
 * How big the fault-injection scenarios run. `npm test` runs them at CI size, so the whole
 * suite stays within minutes; `npm run chaos` sets LATCHKEY_CHAOS=full for the sizes the
 * scenarios are specified at.
 */
export const FULL = process.env['LATCHKEY_CHAOS'] === 'full';

/** `full` under `npm run chaos`, else `ci`. */
export function scaled(ci: number, full: number): number {
  return FULL ? full : ci;
}
