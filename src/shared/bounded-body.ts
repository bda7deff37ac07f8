/**
 * Request bodies read under limits, for handlers below the gateway (the
 * Files and Batches routes, the idempotency wrapper) that must not import
 * it: a byte limit, and deadlines — nothing for `idleMs` (a declared length
 * never sent), or an average rate below `minBytesPerS` once `graceMs` have
 * passed (a drip that would hold the connection for hours) — both a 408
 * BODY_READ_TIMEOUT with `connection: close`.
 */
import { LlmgwError } from "./errors.ts";

export interface BodyDeadlines {
  /** Longest wait for the next chunk. */
  idleMs: number;
  /** Slowest average rate, enforced once `graceMs` have passed since the read began. */
  minBytesPerS?: number;
  graceMs?: number;
}

/**
 * The one rule every request body is read under, on every route: nothing
 * for `bodyReadTimeoutMs`, or (once that long has passed) an average below
 * `minBytesPerS`, is a 408. A small body must so arrive within about
 * `bodyReadTimeoutMs`, a large one at a steady rate however long it is.
 */
export function bodyDeadlines(bodyReadTimeoutMs: number, minBytesPerS: number): BodyDeadlines {
  return { idleMs: bodyReadTimeoutMs, graceMs: bodyReadTimeoutMs, minBytesPerS };
}

/** Requests whose body was read to its end here (a refusal after that may keep the connection). */
const readWhole = new WeakSet<Request>();

/** Whether `req`'s body was read to its end through readBodyChunks: a refusal before that must close the connection, or Bun drains the rest. */
export function bodyReadWhole(req: Request): boolean {
  return readWhole.has(req);
}

/** Whether the request declared a body (one a handler that answers before reading it leaves for Bun to drain). */
export function declaresBody(req: Request): boolean {
  const length = req.headers.get("content-length");
  return (length !== null && length !== "0") || req.headers.has("transfer-encoding");
}

function timedOut(message: string): LlmgwError {
  return new LlmgwError("BODY_READ_TIMEOUT", message, { headers: { connection: "close" } });
}

/**
 * The body's chunks as they arrive, each read awaited (the caller's pace is
 * the backpressure). Throws `tooLarge()` past `limit` bytes (a declared
 * length over it before a byte is read) and BODY_READ_TIMEOUT past a deadline.
 */
export async function* readBodyChunks(req: Request, limit: number, tooLarge: () => Error, deadlines?: BodyDeadlines): AsyncGenerator<Uint8Array> {
  if (Number(req.headers.get("content-length") ?? NaN) > limit) throw tooLarge();
  if (!req.body) {
    readWhole.add(req);
    return;
  }
  const reader = req.body.getReader();
  const start = performance.now();
  let total = 0;
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const read = reader.read();
      let next: Awaited<typeof read>;
      if (deadlines === undefined) next = await read;
      else {
        const elapsed = performance.now() - start;
        const grace = deadlines.graceMs ?? deadlines.idleMs;
        // When the average would fall below the minimum if nothing more came.
        const rateDue = deadlines.minBytesPerS === undefined ? Number.POSITIVE_INFINITY : grace + (total / deadlines.minBytesPerS) * 1000 - elapsed;
        const wait = Math.max(0, Math.min(deadlines.idleMs, rateDue));
        const idle = wait === deadlines.idleMs;
        const expired = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                idle
                  ? timedOut(`the request body stopped arriving for ${deadlines.idleMs} ms`)
                  : timedOut(`the request body arrived slower than ${deadlines.minBytesPerS} bytes/s on average`),
              ),
            wait,
          );
        });
        try {
          next = await Promise.race([read, expired]);
        } finally {
          clearTimeout(timer);
          read.catch(() => {}); // a read that lost the race settles later, unobserved
        }
      }
      if (next.done) {
        readWhole.add(req);
        return;
      }
      total += next.value.byteLength;
      if (total > limit) throw tooLarge();
      yield next.value;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/**
 * Bodies with a declared length up to this are read in one native call
 * (`req.arrayBuffer()`) under a single timer rather than chunk by chunk: an
 * async generator and a timer per chunk cost a chat request about 10 % more
 * main-thread CPU, and a body this small arrives in one or two chunks anyway.
 */
const WHOLE_READ_MAX_BYTES = 1 << 20;

/**
 * The whole body, for the request path. A declared length up to
 * WHOLE_READ_MAX_BYTES is read in one piece and must arrive within the
 * grace period plus what the minimum rate allows for that length (`idleMs`
 * without a rate) — the chunked rule's bound for a body of that size, without
 * its per-pause check; anything else is read by readBodyChunks. Bun reads
 * exactly the declared length, so a client that sends more than it declared
 * cannot grow the body past it.
 */
export async function readBodyBytes(req: Request, limit: number, tooLarge: () => Error, deadlines: BodyDeadlines): Promise<Uint8Array> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  if (declared > limit) throw tooLarge();
  if (!(declared <= WHOLE_READ_MAX_BYTES) || req.body === null) {
    const chunks: Uint8Array[] = [];
    let total = 0;
    for await (const chunk of readBodyChunks(req, limit, tooLarge, deadlines)) {
      chunks.push(chunk);
      total += chunk.byteLength;
    }
    return Buffer.concat(chunks, total);
  }
  const rateMs = deadlines.minBytesPerS === undefined ? 0 : (deadlines.graceMs ?? deadlines.idleMs) + (declared / deadlines.minBytesPerS) * 1000;
  const dueMs = Math.max(deadlines.idleMs, rateMs);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const reading = req.arrayBuffer();
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut(`the request body (${declared} bytes declared) did not arrive within ${Math.round(dueMs)} ms`)), dueMs);
  });
  try {
    const bytes = new Uint8Array(await Promise.race([reading, expired]));
    readWhole.add(req);
    return bytes;
  } finally {
    clearTimeout(timer);
    reading.catch(() => {}); // a read that lost the race settles later, unobserved
  }
}

/** The whole body under a byte limit; undefined means "too large" (the caller names the limit in its own 413). */
export async function readBodyUpTo(req: Request, limit: number, deadlines?: BodyDeadlines): Promise<Uint8Array | undefined> {
  const tooLarge = new Error("too large");
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    // Streamed whether or not a length was declared: a client may declare less than it sends.
    for await (const chunk of readBodyChunks(req, limit, () => tooLarge, deadlines)) {
      chunks.push(chunk);
      total += chunk.byteLength;
    }
  } catch (err) {
    if (err === tooLarge) return undefined;
    throw err;
  }
  return Buffer.concat(chunks, total);
}
