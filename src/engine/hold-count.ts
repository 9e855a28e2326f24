import { currentContext } from '../owner.js';
import type { Engine } from './engine.js';

/**
 * How many times the calling async context holds a lock kept as a hash `owner field -> hold
 * count` (0 when it does not): one HGET of the field `fieldOf(ownerId)`. For a non-reentrant lock
 * (`heldByContext` defined), 1 or 0 from this client's own state, with no round trip.
 * @internal
 */
export async function hashHoldCount(
  engine: Engine,
  key: string,
  name: string,
  heldByContext: boolean | undefined,
  fieldOf: (ownerId: string) => string,
): Promise<number> {
  engine.assertOpen();
  const context = currentContext();
  if (context === undefined) return 0;
  if (heldByContext !== undefined) return heldByContext ? 1 : 0;
  const reply = await engine.command(['HGET', key, fieldOf(context.ownerId)], `reading lock "${name}"`);
  return reply === null || reply === undefined ? 0 : Number(reply);
}
