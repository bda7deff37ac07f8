/** Reading a fetch Response body: the default reader's type, and Bun's readMany() that takes every buffered chunk in one call. The leaf the upstream, the JSON answer reader and the relay share. */

export function defaultReader(body: ReadableStream<Uint8Array>) {
  return body.getReader();
}
/** The default reader of a fetch Response body. */
export type BodyReader = ReturnType<typeof defaultReader>;

interface ReadManyResult {
  done: boolean;
  value: Uint8Array[];
}

/**
 * Every chunk the body has buffered, in one call: Bun's reader.readMany(),
 * synchronous when something is already there (a promise only when it must
 * wait). Bun has it on every default reader, but the types this project
 * compiles against declare only read(), hence the one cast here.
 */
export function readMany(reader: BodyReader): ReadManyResult | Promise<ReadManyResult> {
  return (reader as unknown as { readMany(): ReadManyResult | Promise<ReadManyResult> }).readMany();
}
