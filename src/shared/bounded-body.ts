/**
 * A request body read under a byte limit, for handlers below the gateway
 * (the Files and Batches routes, the idempotency wrapper) that must not
 * import it. Undefined means "too large"; the caller names the limit in its
 * own 413.
 */

export async function readBodyUpTo(req: Request, limit: number): Promise<Uint8Array | undefined> {
  // A declared length over the limit is refused before a byte is read.
  if (Number(req.headers.get("content-length") ?? NaN) > limit) return undefined;
  if (!req.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  // Streamed whether or not a length was declared: a client may declare less than it sends.
  for await (const chunk of req.body) {
    total += chunk.byteLength;
    if (total > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}
