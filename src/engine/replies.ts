/**
 * The per-key flags a batch renewal script answers with — one integer per key, 1 when that hold
 * was renewed, 0 when its owner no longer holds it — as booleans; undefined for any other reply.
 * Every kind's renewal script answers this way, so the watchdog reads them alike.
 * @internal
 */
export function renewedFlags(reply: unknown, count: number): readonly boolean[] | undefined {
  if (!Array.isArray(reply) || reply.length !== count) return undefined;
  return reply.map((flag) => Number(flag) === 1);
}
