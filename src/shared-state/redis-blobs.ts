/**
 * File bytes in Redis, in chunks of CHUNK_BYTES under P:blob:BLOB:N: written
 * as an upload streams (each chunk one SET, under the command timeout, with
 * an expiry so an upload that dies leaves nothing behind), kept for good when
 * the file is stored, and read back as a stream one chunk per pull.
 */
import type { ContentWriter } from "../jobs/jobs-store.ts";
import type { RedisConnection } from "./redis-connection.ts";

const CHUNK_BYTES = 1024 * 1024;
/** Chunks of an upload not (yet) stored expire after this. */
const UNCOMMITTED_TTL_MS = 24 * 3600 * 1000;

export class RedisContentWriter implements ContentWriter {
  readonly blob = crypto.randomUUID();
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  #bytes = 0;
  #chunks = 0;

  constructor(
    private readonly r: RedisConnection,
    private readonly prefix: string,
    readonly fileId: string,
  ) {}

  get bytes(): number {
    return this.#bytes;
  }

  get chunks(): number {
    return this.#chunks;
  }

  async write(chunk: Uint8Array): Promise<void> {
    this.#pending.push(new Uint8Array(chunk));
    this.#pendingBytes += chunk.byteLength;
    this.#bytes += chunk.byteLength;
    while (this.#pendingBytes >= CHUNK_BYTES) await this.#flush(CHUNK_BYTES);
  }

  async #flush(n: number): Promise<void> {
    const all = Buffer.concat(this.#pending, this.#pendingBytes);
    const head = all.subarray(0, n);
    const rest = all.subarray(n);
    this.#pending = rest.byteLength > 0 ? [new Uint8Array(rest)] : [];
    this.#pendingBytes = rest.byteLength;
    await this.r.setBytes(`${this.prefix}${this.blob}:${this.#chunks}`, head, UNCOMMITTED_TTL_MS);
    this.#chunks++;
  }

  /** The last chunk written and every chunk kept for good (the file is being stored). */
  async finish(): Promise<void> {
    if (this.#pendingBytes > 0) await this.#flush(this.#pendingBytes);
    await Promise.all(Array.from({ length: this.#chunks }, (_, i) => this.r.send("PERSIST", [`${this.prefix}${this.blob}:${i}`])));
  }

  async abort(): Promise<void> {
    this.#pending = [];
    this.#pendingBytes = 0;
    await dropBlob(this.r, this.prefix, this.blob, this.#chunks).catch(() => {});
  }
}

export async function dropBlob(r: RedisConnection, prefix: string, blob: string, chunks: number): Promise<void> {
  for (let i = 0; i < chunks; i += 256) {
    const keys = Array.from({ length: Math.min(256, chunks - i) }, (_, k) => `${prefix}${blob}:${i + k}`);
    await r.send("DEL", keys);
  }
}

/** The blob's bytes, one chunk fetched per pull (the client's pace). */
export function blobStream(r: RedisConnection, prefix: string, blob: string, chunks: number): ReadableStream<Uint8Array> {
  let next = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (next >= chunks) return controller.close();
      const bytes = await r.getBytes(`${prefix}${blob}:${next++}`);
      if (bytes === undefined) return controller.error(new Error(`chunk ${next - 1} of the file is missing`));
      controller.enqueue(bytes);
    },
  });
}
