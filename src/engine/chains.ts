/**
 * Runs operations on one (lock, owner) pair one at a time. Every lock script carries the hold
 * count it expects, which is what makes a retried call safe; that needs no two calls for the
 * same owner field in flight at once.
 * @internal
 */
export class OperationChains {
  readonly #tails = new Map<string, Promise<void>>();

  /**
   * Runs `operation` after every earlier one on the same chain; on an idle chain it starts at
   * once, before this returns.
   */
  run<T>(chain: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(chain);
    const result = previous === undefined ? operation() : previous.then(operation);
    const forget = (): void => {
      if (this.#tails.get(chain) === tail) this.#tails.delete(chain);
    };
    const tail: Promise<void> = result.then(forget, forget);
    this.#tails.set(chain, tail);
    return result;
  }

  /**
   * {@link OperationChains.run} for an operation that hands back its result early and keeps the
   * chain busy with clean-up work through `keepBusy`.
   */
  runKeepingBusy<T>(
    chain: string,
    operation: (keepBusy: (work: Promise<unknown>) => void) => Promise<T>,
  ): Promise<T> {
    const previous = this.#tails.get(chain);
    let extra: Promise<unknown>[] | undefined;
    const keepBusy = (work: Promise<unknown>): void => {
      (extra ??= []).push(work);
    };
    const result = previous === undefined ? operation(keepBusy) : previous.then(() => operation(keepBusy));
    const forget = (): void => {
      if (this.#tails.get(chain) === tail) this.#tails.delete(chain);
    };
    const settled = (): Promise<void> | void => {
      if (extra === undefined) return forget();
      return Promise.allSettled(extra).then(forget);
    };
    const tail: Promise<void> = result.then(settled, settled);
    this.#tails.set(chain, tail);
    return result;
  }

  /** Whether no operation is running or queued on `chain`. */
  idle(chain: string): boolean {
    return !this.#tails.has(chain);
  }

  get size(): number {
    return this.#tails.size;
  }
}

/** @internal */
export function chainId(key: string, field: string): string {
  return `${key}\n${field}`;
}
