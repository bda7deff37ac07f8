/** A part that an earlier-built part calls into, bound once when it is built: the one way the data plane's assembly breaks a cycle. */

/**
 * The assembly builds each part from those before it. Where two parts need
 * each other (the circuit breakers count into metrics that read the
 * registry holding the breakers; batch lines run through the request path
 * that serves the batches API), the earlier one gets a Late, named for what
 * it waits on, and calls get() only when it runs — after the assembly has
 * bound it. A get() before that is a wiring bug and throws, naming the part.
 */
export class Late<T> {
  #value: T | undefined;
  #bound = false;

  constructor(readonly what: string) {}

  /** Binds the part once it is built; binding twice is a wiring bug. */
  bind(value: T): T {
    if (this.#bound) throw new Error(`${this.what} was bound twice`);
    this.#value = value;
    this.#bound = true;
    return value;
  }

  get(): T {
    if (!this.#bound) throw new Error(`${this.what} used before it was built`);
    return this.#value as T;
  }

  /** The part, or undefined before it is bound (for a caller that may run earlier and has nothing to do then). */
  peek(): T | undefined {
    return this.#value;
  }
}
