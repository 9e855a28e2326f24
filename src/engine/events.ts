import type { EventEmitter } from 'eventemitter3';
import type { LockClientEvents } from '../options.js';

/** Turns anything thrown into an Error. @internal */
export function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * The client's events as the engine emits them: a throwing listener never reaches the code that
 * emitted, and nothing is built for an event nobody listens to.
 * @internal
 */
export class Events {
  readonly #emitter: EventEmitter<LockClientEvents>;
  /** Set once the client's close() resolved: from then on, nothing is emitted. */
  #muted = false;

  constructor(emitter: EventEmitter<LockClientEvents>) {
    this.#emitter = emitter;
  }

  listening(event: keyof LockClientEvents): boolean {
    return !this.#muted && this.#emitter.listenerCount(event) > 0;
  }

  /** Emits nothing from now on: work that outlives close() (a late clean-up) stays quiet. */
  mute(): void {
    this.#muted = true;
  }

  error(error: Error): void {
    if (this.#muted) return;
    try {
      this.#emitter.emit('error', error);
    } catch {
      // A throwing 'error' listener has nowhere left to report to.
    }
  }

  emit<E extends Exclude<keyof LockClientEvents, 'error'>>(
    event: E,
    payload: Parameters<LockClientEvents[E]>[0],
  ): void {
    if (this.#muted) return;
    try {
      (this.#emitter.emit as (event: E, payload: unknown) => boolean)(event, payload);
    } catch (error) {
      this.error(toError(error));
    }
  }
}
