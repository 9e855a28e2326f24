/**
 * Every request of the read-write lock is safe to repeat: the engine retries a call whose reply
 * was lost, and gives up (cancels) a request whose outcome it never learned. Here the exact calls
 * the protocols build are sent twice, late, or after a cancel, and Redis is checked after each.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ScriptCall } from '../../src/engine/script-call.js';
import type { AcquireRequest, HeldLock, Target } from '../../src/engine/types.js';
import { READ_PROTOCOL, WRITE_PROTOCOL } from '../../src/primitives/read-write-lock/protocol.js';
import { uniquePrefix } from '../support/keys.js';
import { sharedSuite } from '../support/shared-suite.js';

const LEASE_MS = 5_000;

describe('read-write lock requests repeated, late, or cancelled', () => {
  const suite = sharedSuite('rw-idem');

  /** The call's raw reply. */
  function send(call: ScriptCall): Promise<unknown> {
    return suite.admin.sendCommand([
      'EVAL',
      call.script.source,
      String(call.keys.length),
      ...call.keys,
      ...call.args,
    ]);
  }

  /** What the call's reply means, read as the engine reads it. */
  async function decoded<R>(call: ScriptCall<R>): Promise<R> {
    return call.decode(await send(call));
  }

  function setUp(): { key: string; owner: string; read: Target; write: Target } {
    const key = `${uniquePrefix('rw-idem')}ledger`;
    const channel = `redisson_rwlock:{${key}}`;
    return {
      key,
      owner: `${randomUUID()}:7`,
      read: { name: 'ledger', key, channel, protocol: READ_PROTOCOL },
      write: { name: 'ledger', key, channel, protocol: WRITE_PROTOCOL },
    };
  }

  function request(target: Target, field: string, expected: number): AcquireRequest {
    return {
      target,
      field,
      expected,
      requestKey: `latchkey_request:{${target.key}}:${randomUUID()}`,
      leaseMs: LEASE_MS,
      waiter: '',
      queuedAs: '',
      queueTtlMs: LEASE_MS,
      waiting: true,
    };
  }

  function held(target: Target, field: string): HeldLock {
    return { name: target.name, key: target.key, channel: target.channel, field, ttlMs: LEASE_MS };
  }

  const leaseKeys = async (key: string): Promise<string[]> =>
    (await suite.admin.keys(`{${key}}:*:rwlock_timeout:*`))
      .map((name) => name.slice(name.lastIndexOf(':') + 1))
      .sort();

  it('a read acquire replayed is held once; a late copy after a cancel is refused; the cancel undoes the hold and its lease key', async () => {
    const { key, owner, read } = setUp();
    const first = request(read, owner, 0);
    for (let copy = 0; copy < 2; copy += 1) {
      expect(await decoded(READ_PROTOCOL.acquire(first, copy > 0))).toEqual({
        status: 'held',
        proof: undefined,
      });
    }
    expect(await suite.admin.hGet(key, owner)).toBe('1');
    expect(await leaseKeys(key)).toEqual(['1']);

    const second = request(read, owner, 1);
    expect(await send(READ_PROTOCOL.acquire(second, false))).toBeNull();
    // Its outcome unknown to the client, the request is given up: undone, lease key and all.
    expect(await send(READ_PROTOCOL.cancelAcquire(second, 60_000))).toBe(1);
    expect(await send(READ_PROTOCOL.cancelAcquire(second, 60_000))).toBe(0);
    expect(await suite.admin.hGet(key, owner)).toBe('1');
    expect(await leaseKeys(key)).toEqual(['1']);
    // A copy of it arriving late is refused and changes nothing.
    expect(await decoded(READ_PROTOCOL.acquire(second, true))).toEqual({
      status: 'cancelled',
    });
    expect(await suite.admin.hGet(key, owner)).toBe('1');
    // A request from a client whose idea of the count is wrong: its hold was lost.
    expect(await decoded(READ_PROTOCOL.acquire(request(read, owner, 3), false))).toEqual({
      status: 'lost',
    });
  });

  it('read releases replayed: partial stays partial, the last one frees once and publishes once', async () => {
    const { key, owner, read } = setUp();
    const messages: string[] = [];
    const subscriber = await suite.res.connect();
    await subscriber.subscribe(read.channel, (message) => messages.push(message));
    await send(READ_PROTOCOL.acquire(request(read, owner, 0), false));
    await send(READ_PROTOCOL.acquire(request(read, owner, 1), false));
    expect(await leaseKeys(key)).toEqual(['1', '2']);

    const hold = held(read, owner);
    const replies = [];
    for (const expected of [2, 2, 1, 1]) {
      replies.push(await decoded(READ_PROTOCOL.release(hold, expected)));
    }
    expect(replies).toEqual(['partial', 'partial', 'freed', 'absent']);
    expect(await suite.admin.exists(key)).toBe(0);
    expect(await leaseKeys(key)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(messages).toEqual(['0']);
  });

  it('write requests replayed, cancelled and released twice; an upgrade is refused without a change', async () => {
    const { key, owner, read, write } = setUp();
    const writer = `${owner}:write`;
    const first = request(write, writer, 0);
    expect(await send(WRITE_PROTOCOL.acquire(first, false))).toBeNull();
    expect(await send(WRITE_PROTOCOL.acquire(first, true))).toBeNull();
    expect(await suite.admin.hGetAll(key)).toEqual({ mode: 'write', [writer]: '1' });

    const second = request(write, writer, 1);
    expect(await send(WRITE_PROTOCOL.acquire(second, false))).toBeNull();
    expect(await send(WRITE_PROTOCOL.cancelAcquire(second, 60_000))).toBe(1);
    expect(await decoded(WRITE_PROTOCOL.acquire(second, true))).toEqual({
      status: 'cancelled',
    });
    expect(await suite.admin.hGetAll(key)).toEqual({ mode: 'write', [writer]: '1' });

    const hold = held(write, writer);
    expect(await decoded(WRITE_PROTOCOL.release(hold, 1))).toBe('freed');
    expect(await decoded(WRITE_PROTOCOL.release(hold, 1))).toBe('absent');
    expect(await suite.admin.exists(key)).toBe(0);

    // The owner reads; asking for the write lock now is an upgrade.
    await send(READ_PROTOCOL.acquire(request(read, owner, 0), false));
    const before = await suite.admin.hGetAll(key);
    const outcome = await decoded(WRITE_PROTOCOL.acquire(request(write, writer, 0), false));
    expect(outcome.status).toBe('refused');
    expect(await suite.admin.hGetAll(key)).toEqual(before);
    expect(await suite.admin.exists(`latchkey_writers:{${key}}`)).toBe(0);
  });
});
