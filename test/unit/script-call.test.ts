/**
 * Typed script calls, without Redis: a call checks its keys against its script's header when it
 * is built, reads its reply into what the reply means, and rejects a reply its script never gives
 * with a LockError that names the script but never shows the reply's text. The shared reply codes
 * map to one error per failed outcome.
 */
import { describe, expect, it } from 'vitest';
import { LockError, LockLostError, LockNotOwnedError, LockUpgradeError } from '../../src/errors.js';
import { outcomeError } from '../../src/engine/outcome-error.js';
import { countedRelease, renewedFlags, REPLY, sharedAcquireReply } from '../../src/engine/replies.js';
import { ScriptCall } from '../../src/engine/script-call.js';
import type { AcquireRequest, HeldLock, Target } from '../../src/engine/types.js';
import { fairLockProtocol } from '../../src/primitives/fair-lock/protocol.js';
import { reentrantProtocol } from '../../src/primitives/lock/protocol.js';
import { WRITE_PROTOCOL } from '../../src/primitives/read-write-lock/protocol.js';
import { luaScripts } from '../../src/scripts/generated.js';

const FORCE_RELEASE = luaScripts['lock/force-release'];
const yesOrNo = (reply: unknown): boolean | undefined =>
  reply === 1 ? true : reply === 0 ? false : undefined;

function target(protocol: Target['protocol']): Target {
  return { name: 'invoice:42', key: 'invoice:42', channel: 'redisson_lock__channel:{invoice:42}', protocol };
}

function request(on: Target): AcquireRequest {
  return {
    target: on,
    field: 'client:owner',
    expected: 0,
    requestKey: 'latchkey_request:{invoice:42}:r1',
    leaseMs: 30_000,
    waiter: '',
    queuedAs: '',
    queueTtlMs: 90_000,
    waiting: true,
  };
}

describe('ScriptCall', () => {
  it('refuses keys that are not as many as its script declares, and takes exactly that many', () => {
    expect(FORCE_RELEASE.numberOfKeys).toBe(3);
    expect(() => new ScriptCall(FORCE_RELEASE, ['invoice:42', 'queue'], ['channel'], yesOrNo)).toThrow(
      /Script "lock\/force-release" takes 3 key\(s\), but a call was built with 2/,
    );
    expect(() => new ScriptCall(FORCE_RELEASE, ['a', 'b', 'c', 'd'], [], yesOrNo)).toThrow(RangeError);
    const call = new ScriptCall(FORCE_RELEASE, ['invoice:42', 'queue', 'foreign'], ['channel'], yesOrNo);
    expect(call.keys).toEqual(['invoice:42', 'queue', 'foreign']);
    expect(call.args).toEqual(['channel']);
  });

  it('takes one or more keys for a script that declares a variable number, never none', () => {
    const renew = luaScripts['lock/renew'];
    expect(renew.numberOfKeys).toBeNull();
    expect(() => new ScriptCall(renew, [], ['30000'], renewedFlags(0))).toThrow(/one or more/);
    const call = new ScriptCall(renew, ['a', 'b', 'c'], ['30000', 'f1', 'f2', 'f3'], renewedFlags(3));
    expect(call.decode([1, 0, 1])).toEqual([true, false, true]);
  });

  it('decodes a reply its script gives, and rejects any other as REDIS_ERROR without its text', () => {
    const call = new ScriptCall(FORCE_RELEASE, ['invoice:42', 'queue', 'foreign'], ['channel'], yesOrNo);
    expect(call.decode(1)).toBe(true);
    expect(call.decode(0)).toBe(false);
    for (const [reply, shape] of [
      ['client-secret-token', 'a string'],
      [7, 'the number 7'],
      [null, 'nil'],
      [[1, 2], 'an array of 2'],
    ] as const) {
      let thrown: unknown;
      try {
        call.decode(reply);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(LockError);
      expect((thrown as LockError).code).toBe('REDIS_ERROR');
      expect((thrown as LockError).message).toBe(
        `Unexpected reply from Redis to script "lock/force-release": ${shape}`,
      );
    }
  });

  it("checks every kind's calls against their scripts as the protocol builds them", () => {
    const hold: HeldLock = {
      name: 'invoice:42',
      key: 'invoice:42',
      channel: 'redisson_lock__channel:{invoice:42}',
      field: 'client:owner',
      ttlMs: 30_000,
    };
    for (const protocol of [
      reentrantProtocol(false),
      reentrantProtocol(true),
      fairLockProtocol(60_000, 5_000),
    ]) {
      const on = target(protocol);
      const calls = [
        protocol.acquire(request(on), false),
        protocol.cancelAcquire(request(on), 60_000),
        protocol.release(hold, 1),
        protocol.renew([hold, hold], 30_000),
        protocol.abandon(hold),
        protocol.forceRelease(on),
      ];
      for (const call of calls) {
        expect(call.keys.length).toBe(call.script.numberOfKeys ?? call.keys.length);
      }
    }
  });
});

describe('reply codes and outcomes', () => {
  it('reads the codes every kind shares once, for every kind', () => {
    expect(sharedAcquireReply(null)).toEqual({ status: 'held', proof: undefined });
    expect(sharedAcquireReply(REPLY.ACQUIRE_CANCELLED)).toEqual({ status: 'cancelled' });
    expect(sharedAcquireReply(REPLY.HOLD_LOST)).toEqual({ status: 'lost' });
    expect(sharedAcquireReply(5)).toBeUndefined();
    expect([null, 0, 1, -4, 2].map(countedRelease)).toEqual([
      'absent',
      'partial',
      'freed',
      'changed',
      undefined,
    ]);
    const lock = reentrantProtocol(false);
    const write = WRITE_PROTOCOL;
    for (const protocol of [lock, write, fairLockProtocol(60_000, 5_000)]) {
      const acquire = protocol.acquire(request(target(protocol)), false);
      expect(acquire.decode(-3)).toEqual({ status: 'cancelled' });
      expect(acquire.decode(-4)).toEqual({ status: 'lost' });
    }
    const refused = write.acquire(request(target(write)), false).decode(-5);
    expect(refused.status).toBe('refused');
    if (refused.status === 'refused') expect(refused.error('ledger')).toBeInstanceOf(LockUpgradeError);
  });

  it('maps each failed outcome to the error its caller sees, declaring the hold lost where it is gone', () => {
    const lost: string[] = [];
    const loseHold = (message: string): LockLostError => {
      lost.push(message);
      return new LockLostError(message, 'not-owner');
    };
    const absent = outcomeError('absent', 'invoice:42', loseHold);
    expect(absent).toBeInstanceOf(LockNotOwnedError);
    expect(absent.message).toBe('Lock "invoice:42" is not held by this owner: it expired or was taken over');
    expect(absent.cause).toBeInstanceOf(LockLostError);
    expect(outcomeError('changed', 'invoice:42', loseHold)).toBeInstanceOf(LockNotOwnedError);
    const gone = outcomeError({ status: 'lost' }, 'invoice:42', loseHold);
    expect(gone).toBeInstanceOf(LockLostError);
    expect(lost).toHaveLength(3);

    const cancelled = outcomeError({ status: 'cancelled' }, 'invoice:42', loseHold);
    expect(cancelled.code).toBe('REDIS_ERROR');
    expect(lost).toHaveLength(3);
    // Without a hold to declare lost, a lost acquire still rejects with a LockLostError.
    expect(outcomeError({ status: 'lost' }, 'invoice:42')).toBeInstanceOf(LockLostError);
  });
});
