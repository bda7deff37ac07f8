/** The request path's one swap point: each request takes the context current when it starts and keeps it to its end. */
import type { GatewayContext } from "../gateway/context.ts";

/**
 * A configuration reload builds a whole new context (sharing every part that
 * did not change, and the stateful ones — admission, breakers, registry,
 * metrics — always) and swaps it in with one assignment, between two
 * requests: a request never sees half of a reload, and one in flight
 * finishes with the settings it started with.
 */
export class LiveContext {
  #current: GatewayContext;

  constructor(initial: GatewayContext) {
    this.#current = initial;
  }

  get current(): GatewayContext {
    return this.#current;
  }

  swap(next: GatewayContext): void {
    this.#current = next;
  }
}
