/**
 * Reading an upstream answer's body: what the upstream, the JSON answer
 * reader, the relay and the drains ask of it. Both clients give it: the
 * HTTP/1.1 pool (http1-client.ts) natively, fetch through its Response's
 * default reader. The leaf they all share.
 */

export interface ReadManyResult {
  done: boolean;
  value: Uint8Array[];
}

/** An answer body, read a burst at a time. */
export interface BodyReader {
  /**
   * Every chunk buffered so far, in one call: synchronous when something is
   * already there (a promise only when it must wait); rejects when the body
   * breaks. `done` with no chunks once the body is over.
   */
  readMany(): ReadManyResult | Promise<ReadManyResult>;
  /** Stop reading: the connection is closed (it cannot be reused). */
  cancel(reason?: unknown): Promise<void>;
}

/**
 * A fetch Response body as a BodyReader: its default reader, whose
 * readMany() Bun has on every default reader but the types this project
 * compiles against do not declare, hence the one cast here.
 */
export function defaultReader(body: ReadableStream<Uint8Array>): BodyReader {
  return body.getReader() as unknown as BodyReader;
}
