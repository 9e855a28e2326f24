import type { Engine } from '../../engine/index.js';
import { announcedPermits } from './protocol.js';

/**
 * What one client knows about its own acquires waiting on one semaphore channel: how many
 * permits each asks for, and how many messages the channel brought. The engine wakes the first
 * `wakes(message)` local waiters of a channel per message; this book decides that number.
 * @internal
 */
export class LocalWaiters {
  /** Messages heard on the channel while any acquire of this client was registered. */
  seq = 0;
  /** Acquires in progress, by the number of permits each asks for. */
  readonly #demands = new Map<number, number>();
  #count = 0;

  /** Acquires of this client in progress on the channel. */
  get count(): number {
    return this.#count;
  }

  join(permits: number): void {
    this.#demands.set(permits, (this.#demands.get(permits) ?? 0) + 1);
    this.#count += 1;
  }

  /** Returns whether no acquire is left. */
  leave(permits: number): boolean {
    const left = (this.#demands.get(permits) ?? 1) - 1;
    if (left === 0) this.#demands.delete(permits);
    else this.#demands.set(permits, left);
    this.#count -= 1;
    return this.#count === 0;
  }

  /**
   * How many local waiters a message announcing `message` free permits wakes. When every local
   * acquire asks for the same number of permits, as many as the free permits can serve (a release
   * of k single permits wakes k waiters, not all). When they ask for different numbers, the
   * engine's order of waiters says nothing about who fits, so all of them try: none that fits
   * sleeps through free permits, and those that do not fit sleep again.
   */
  wakes(message: string): number {
    this.seq += 1;
    const free = announcedPermits(message);
    if (free <= 0) return 0;
    if (this.#demands.size !== 1) return this.#demands.size === 0 ? 1 : Number.POSITIVE_INFINITY;
    const [asked] = this.#demands.keys();
    return Math.floor(free / (asked ?? 1));
  }
}

const books = new WeakMap<Engine, Map<string, LocalWaiters>>();

/** The book of `channel` on `engine`, created if needed; drop it with {@link leaveBook}. @internal */
export function joinBook(engine: Engine, channel: string, permits: number): LocalWaiters {
  let byChannel = books.get(engine);
  if (byChannel === undefined) {
    byChannel = new Map();
    books.set(engine, byChannel);
  }
  let book = byChannel.get(channel);
  if (book === undefined) {
    book = new LocalWaiters();
    byChannel.set(channel, book);
  }
  book.join(permits);
  return book;
}

/** @internal */
export function leaveBook(engine: Engine, channel: string, book: LocalWaiters, permits: number): void {
  if (!book.leave(permits)) return;
  const byChannel = books.get(engine);
  if (byChannel?.get(channel) === book) byChannel.delete(channel);
}

/**
 * The `wakes` of a channel's subscription. The engine keeps the first one it is given for as long
 * as the subscription lives (past the book's life), so it looks the current book up each time.
 * @internal
 */
export function wakesOf(engine: Engine, channel: string): (message: string) => number {
  return (message) => books.get(engine)?.get(channel)?.wakes(message) ?? 1;
}
