/**
 * POST /v1/files as a stream: the multipart body (busboy) flows to storage
 * chunk by chunk with backpressure, each chunk checked as JSONL on its way
 * (the line still open is all that is held), the body-read deadlines and the
 * byte limit applied as it arrives, a gateway-wide budget on the bytes all
 * uploads hold in memory, and the tenant's storage quota enforced before and
 * during the upload. Nothing is visible until the whole file is stored; a
 * refusal at any point drops what was written.
 */

import { createHash, type Hash } from "node:crypto";
import { once } from "node:events";
import type { Readable } from "node:stream";
import busboy from "busboy";
import type { BatchConfig } from "../config/types.ts";
import { bodyDeadlines, readBodyChunks } from "../shared/bounded-body.ts";
import { LlmgwError } from "../shared/errors.ts";
import { UploadBudget } from "../shared/upload-budget.ts";
import { BatchInputValidator, type ParsedBatchInput } from "./batch-input.ts";
import type { ContentWriter, JobsStore } from "./jobs-store.ts";

/**
 * Every this many bytes of an upload the gateway asks for a garbage
 * collection (Bun.gc(false): queued, ~0.2 ms on the loop, where a forced one
 * paused it 11-19 ms). The request body arrives as ~64 KB buffers that
 * become garbage at once, and the heap otherwise grew by 70-100 MiB before
 * collecting them during a 150 MB upload; with a request every 8 MiB, by
 * ~32 MiB (measured by the 150 MB upload e2e test).
 */
const UPLOAD_GC_EVERY_BYTES = 8 * 1024 * 1024;

/** Room for the multipart boundaries and part headers around the file itself. */
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

export type UploadLimits = Pick<
  BatchConfig,
  "maxFileBytes" | "maxLines" | "maxLineBytes" | "maxLineDepth" | "uploadMinBytesPerS" | "tenantMaxBytes" | "tenantMaxFiles"
>;

export { UploadBudget };

interface UploadedFile {
  filename: string;
  input: ParsedBatchInput;
  content: ContentWriter;
  /** sha256 of the method, path and raw body, for Idempotency-Key. */
  fingerprint: string;
}

interface UploadContext {
  req: Request;
  tenant: string;
  store: JobsStore;
  limits: UploadLimits;
  budget: UploadBudget;
  knownModel: (name: string) => boolean;
  /** Deadline on the body's chunks (body_read_timeout_ms); the rate minimum applies once it has passed. */
  bodyReadTimeoutMs: number;
  fileId: string;
}

function tooLarge(limit: number): LlmgwError {
  return new LlmgwError("BODY_TOO_LARGE", `the file exceeds the limit of ${limit} bytes (batch.max_file_bytes)`, { param: "file" });
}

function overQuota(what: string, limit: number, key: string): LlmgwError {
  return new LlmgwError(
    "STORAGE_QUOTA_EXCEEDED",
    `the tenant's stored files would exceed its limit of ${limit} ${what} (batch.${key}); delete files to make room`,
    { param: "file" },
  );
}

/** Stream the upload into storage; the caller stores the file (putFile) or aborts `content`. Refusals throw. */
export async function receiveUpload(u: UploadContext): Promise<UploadedFile & { purpose: string | undefined }> {
  const type = u.req.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("multipart/form-data")) {
    throw new LlmgwError("INVALID_REQUEST", "expected a multipart/form-data upload with the fields 'file' and 'purpose'");
  }
  const { limits } = u;
  const usage = await u.store.usage(u.tenant);
  if (usage.files >= limits.tenantMaxFiles) throw overQuota("files", limits.tenantMaxFiles, "tenant_max_files");
  const roomBytes = limits.tenantMaxBytes - usage.bytes;
  const declared = Number(u.req.headers.get("content-length") ?? NaN);
  if (declared - MULTIPART_OVERHEAD_BYTES > roomBytes) throw overQuota("bytes", limits.tenantMaxBytes, "tenant_max_bytes");

  const hash: Hash = createHash("sha256").update(`${u.req.method}\u0000${new URL(u.req.url).pathname}\u0000`);
  let bb: busboy.Busboy;
  try {
    bb = busboy({ headers: { "content-type": type }, limits: { files: 1, fields: 16, fieldSize: 64 * 1024, parts: 32, fileSize: limits.maxFileBytes } });
  } catch {
    throw new LlmgwError("INVALID_REQUEST", "the multipart/form-data body could not be parsed (no boundary)");
  }
  let purpose: string | undefined;
  let failure: unknown;
  let fail: (err: unknown) => void = () => {};
  // Rejects when the file part is refused: waits on busboy end there (it may never close once its part stream is gone).
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {});
  let received: Promise<{ filename: string; input: ParsedBatchInput; content: ContentWriter }> | undefined;
  bb.on("field", (name, value) => {
    if (name === "purpose") purpose = value;
  });
  bb.on("file", (name, stream, info) => {
    if (name !== "file" || received !== undefined) {
      stream.resume();
      return;
    }
    received = storeFile(u, stream, info.filename, roomBytes).catch((err: unknown) => {
      failure ??= err;
      fail(err);
      throw err;
    });
    received.catch(() => {});
  });
  const ended = new Promise<void>((resolve, reject) => {
    bb.on("close", resolve);
    bb.on("error", (err: unknown) =>
      reject(new LlmgwError("INVALID_REQUEST", `the multipart/form-data body could not be parsed (${err instanceof Error ? err.message : String(err)})`)),
    );
  });
  ended.catch(() => {});
  const overLimit = tooLarge(limits.maxFileBytes);
  try {
    for await (const chunk of readBodyChunks(
      u.req,
      limits.maxFileBytes + MULTIPART_OVERHEAD_BYTES,
      () => overLimit,
      bodyDeadlines(u.bodyReadTimeoutMs, limits.uploadMinBytesPerS),
    )) {
      // Refused already: the rest is read and dropped, so the client (still sending) gets the answer, not a reset connection.
      if (failure !== undefined) continue;
      hash.update(chunk);
      if (!bb.write(chunk)) await Promise.race([once(bb, "drain"), ended, failed]).catch(() => {});
    }
    if (failure !== undefined) throw failure;
    bb.end();
    await Promise.race([ended, failed]);
  } catch (err) {
    // Taken before the parser is destroyed: that fails the file part too
    // ("Unexpected end of file"), which must not replace what stopped the read.
    const cause = failure ?? err;
    bb.destroy();
    await received?.then((r) => r.content.abort()).catch(() => {});
    throw cause;
  }
  if (received === undefined) throw new LlmgwError("INVALID_REQUEST", "a 'file' field with the JSONL content is required", { param: "file" });
  const file = await received;
  return { ...file, purpose, fingerprint: hash.digest("hex") };
}

/** The file part: checked as JSONL and written to storage as it arrives, within the memory budget and the tenant's room. */
async function storeFile(
  u: UploadContext,
  stream: Readable,
  filename: string,
  roomBytes: number,
): Promise<{ filename: string; input: ParsedBatchInput; content: ContentWriter }> {
  const validator = new BatchInputValidator({
    maxLines: u.limits.maxLines,
    knownModel: u.knownModel,
    maxLineBytes: u.limits.maxLineBytes,
    maxDepth: u.limits.maxLineDepth,
    bodies: false,
  });
  let truncated = false;
  stream.on("limit", () => (truncated = true));
  const content = await u.store.openContent(u.fileId);
  let sinceCollection = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Uint8Array>) {
      sinceCollection += chunk.byteLength;
      if (sinceCollection >= UPLOAD_GC_EVERY_BYTES) {
        sinceCollection = 0;
        Bun.gc(false);
      }
      const held = chunk.byteLength + validator.pendingBytes;
      u.budget.take(held);
      try {
        validator.push(chunk);
        if (content.bytes + chunk.byteLength > roomBytes) throw overQuota("bytes", u.limits.tenantMaxBytes, "tenant_max_bytes");
        await content.write(chunk);
      } finally {
        u.budget.give(held);
      }
    }
    if (truncated) throw tooLarge(u.limits.maxFileBytes);
    const { input } = validator.end();
    return { filename: filename || "upload.jsonl", input, content };
  } catch (err) {
    await content.abort();
    throw err;
  }
}
