// The client's events as the engine emits them, with no Redis: a throwing listener is reported on
// `error` and never reaches the emitter, a throwing `error` listener is swallowed, nobody listening
// is said so, and nothing at all is emitted once muted.
import { EventEmitter } from 'eventemitter3';
import { describe, expect, it } from 'vitest';
import { Events, toError } from '../../../src/engine/events.js';
import type { LockClientEvents } from '../../../src/options.js';

const RELEASED = { name: 'orders', key: 'app:orders', holdCount: 0 };

describe('Events', () => {
  it('says whether anyone listens to an event', () => {
    const emitter = new EventEmitter<LockClientEvents>();
    const events = new Events(emitter);
    expect(events.listening('released')).toBe(false);
    emitter.on('released', () => undefined);
    expect(events.listening('released')).toBe(true);
    expect(events.listening('lockLost')).toBe(false);
  });

  it('reports a throwing listener on `error` instead of throwing at the code that emitted', () => {
    const emitter = new EventEmitter<LockClientEvents>();
    const errors: Error[] = [];
    emitter.on('released', () => {
      throw new Error('listener failed');
    });
    emitter.on('error', (error) => errors.push(error));
    expect(() => new Events(emitter).emit('released', RELEASED)).not.toThrow();
    expect(errors.map((error) => error.message)).toEqual(['listener failed']);
  });

  it('swallows a throwing `error` listener, which has nowhere left to report to', () => {
    const emitter = new EventEmitter<LockClientEvents>();
    emitter.on('error', () => {
      throw new Error('error listener failed');
    });
    expect(() => new Events(emitter).error(new Error('renewal failed'))).not.toThrow();
  });

  it('emits nothing once muted, and says nobody listens', () => {
    const emitter = new EventEmitter<LockClientEvents>();
    const heard: string[] = [];
    emitter.on('released', () => heard.push('released'));
    emitter.on('error', () => heard.push('error'));
    const events = new Events(emitter);
    events.emit('released', RELEASED);
    events.mute();
    events.emit('released', RELEASED);
    events.error(new Error('late clean-up failed'));
    expect(heard).toEqual(['released']);
    expect(events.listening('released')).toBe(false);
  });

  it('turns anything thrown into an Error, and keeps an Error as it is', () => {
    const error = new Error('refused');
    expect(toError(error)).toBe(error);
    expect(toError('refused')).toBeInstanceOf(Error);
    expect(toError('refused').message).toBe('refused');
    expect(toError(42).message).toBe('42');
  });
});
