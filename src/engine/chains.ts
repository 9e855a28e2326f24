/**
 * Runs operations on one (lock, owner) pair one at a time. Every lock script carries the hold
 * count it expects, which is what makes a retried call safe; that needs no two calls for the
 * same owner field in flight at once.
 * @internal
 */
export class OperationChains {
  readonly #tails = new Map<string, Promise<void>>();

  /**
   * Runs `operation` after every earlier one on the same chain. An operation can hand back its
   * result early and keep the chain busy with clean-up work through `keepBusy`.
   */
  run<T>(chain: string, operation: (keepBusy: (work: Promise<unknown>) => void) => Promise<T>): Promise<T> {
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

  /**
   * Makes an operation already under way on an idle chain (see {@link OperationChains.idle}) the
   * chain's latest: later operations run after it, as if it had been given to `run`.
   */
  record<T>(chain: string, result: Promise<T>): Promise<T> {
    const forget = (): void => {
      if (this.#tails.get(chain) === tail) this.#tails.delete(chain);
    };
    const tail: Promise<void> = result.then(forget, forget);
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
