// The hold count of the calling async context, against a fake engine (no Redis): 0 outside any
// context with no round trip, one HGET of the context's owner field for a reentrant lock, and
// the client's own state for a non-reentrant one; a closed client refuses first.
import { describe, expect, it } from 'vitest';
import { ClientClosedError } from '../../../src/errors.js';
import type { Engine } from '../../../src/engine/engine.js';
import { hashHoldCount } from '../../../src/engine/hold-count.js';
import { runInContext, type OwnerContext } from '../../../src/owner.js';

/** The part of the engine the count uses: HGET answered with `reply`. */
class FakeEngine {
  readonly commands: { args: string[]; doing: string }[] = [];
  constructor(
    readonly reply: unknown,
    readonly closed = false,
  ) {}
  assertOpen(): void {
    if (this.closed) throw new ClientClosedError();
  }
  command(args: string[], doing: string): Promise<unknown> {
    this.commands.push({ args, doing });
    return Promise.resolve(this.reply);
  }
}

const CONTEXT: OwnerContext = { ownerId: '7', nonReentrant: new Set() };
const fieldOf = (ownerId: string): string => `client-uuid:${ownerId}`;

function count(engine: FakeEngine, heldByContext?: boolean): Promise<number> {
  return hashHoldCount(engine as unknown as Engine, 'orders', 'orders', heldByContext, fieldOf);
}

describe('hashHoldCount', () => {
  it('reads the hold count of the context owner field with one HGET', async () => {
    const engine = new FakeEngine('3');
    await expect(runInContext(CONTEXT, () => count(engine))).resolves.toBe(3);
    expect(engine.commands).toEqual([
      { args: ['HGET', 'orders', 'client-uuid:7'], doing: 'reading lock "orders"' },
    ]);
  });

  it('counts 0 for a field Redis does not have', async () => {
    await expect(runInContext(CONTEXT, () => count(new FakeEngine(null)))).resolves.toBe(0);
  });

  it('counts 0 outside any async context, without a round trip', async () => {
    const engine = new FakeEngine('3');
    await expect(count(engine)).resolves.toBe(0);
    expect(engine.commands).toEqual([]);
  });

  it('counts a non-reentrant lock from the client state, without a round trip', async () => {
    const engine = new FakeEngine('5');
    await expect(runInContext(CONTEXT, () => count(engine, true))).resolves.toBe(1);
    await expect(runInContext(CONTEXT, () => count(engine, false))).resolves.toBe(0);
    expect(engine.commands).toEqual([]);
  });

  it('rejects with ClientClosedError once the client is closed, before anything is sent', async () => {
    const engine = new FakeEngine('3', true);
    await expect(runInContext(CONTEXT, () => count(engine))).rejects.toBeInstanceOf(ClientClosedError);
    expect(engine.commands).toEqual([]);
  });
});
