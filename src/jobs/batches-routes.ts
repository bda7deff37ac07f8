/** POST/GET /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel, with OpenAI's request checks and object shapes. */
import { type BodyDeadlines, bodyDeadlines, readBodyUpTo } from "../shared/bounded-body.ts";
import { LlmgwError } from "../shared/errors.ts";
import { BatchInputValidator } from "./batch-input.ts";
import { noSuchFile } from "./files-routes.ts";
import { newBatchId } from "./job-ids.ts";
import { BATCH_ENDPOINTS, type BatchLine, isBatchEndpoint, newBatchDoc } from "./job-types.ts";
import { type JobsRequest, json, limitParam } from "./jobs-http.ts";
import { UnknownCursorError } from "./jobs-store.ts";
import { batchObject, listObject } from "./openai-objects.ts";
import { asStorageError } from "./storage-errors.ts";

/** OpenAI accepts only a 24-hour completion window. */
const COMPLETION_WINDOWS: Record<string, number> = { "24h": 24 * 3600 * 1000 };
const CREATE_BODY_MAX_BYTES = 64 * 1024;
/** Lines stored per step when a batch is created (each step one short transaction), and their bytes at most. */
const CREATE_CHUNK_LINES = 500;
const CREATE_CHUNK_BYTES = 1024 * 1024;
const CREATE_KEYS = new Set(["input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after"]);
/** OpenAI's metadata limits: 16 pairs, keys up to 64 characters, string values up to 512. */
const METADATA_MAX_PAIRS = 16;
const METADATA_KEY_MAX = 64;
const METADATA_VALUE_MAX = 512;
const BATCHES_PAGE_DEFAULT = 20;
const BATCHES_PAGE_MAX = 100;

function invalid(message: string, param: string | null = null): LlmgwError {
  return new LlmgwError("INVALID_REQUEST", message, { param });
}

function noSuchBatch(id: string): LlmgwError {
  return new LlmgwError("NOT_FOUND", `No such Batch: ${id}`, { param: "batch_id" });
}

function parseMetadata(v: unknown): Record<string, string> | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid("metadata must be an object of string values", "metadata");
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > METADATA_MAX_PAIRS) throw invalid(`metadata may hold at most ${METADATA_MAX_PAIRS} pairs`, "metadata");
  for (const [k, val] of entries) {
    if (k.length > METADATA_KEY_MAX) throw invalid(`metadata keys may be at most ${METADATA_KEY_MAX} characters`, "metadata");
    if (typeof val !== "string" || val.length > METADATA_VALUE_MAX) {
      throw invalid(`metadata.${k} must be a string of at most ${METADATA_VALUE_MAX} characters`, "metadata");
    }
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

async function readCreateBody(req: Request, deadlines: BodyDeadlines): Promise<Record<string, unknown>> {
  const raw = await readBodyUpTo(req, CREATE_BODY_MAX_BYTES, deadlines);
  if (raw === undefined) throw new LlmgwError("BODY_TOO_LARGE", `request body exceeds the limit of ${CREATE_BODY_MAX_BYTES} bytes`);
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder().decode(raw));
  } catch (err) {
    throw new LlmgwError("INVALID_JSON", `request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalid("request body must be a JSON object");
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (!CREATE_KEYS.has(k)) throw invalid(`unrecognized request argument supplied: ${k}`, k);
  return b;
}

/**
 * The input file was validated line by line on upload; here its endpoint
 * must be the batch's, and its lines are parsed again into the batch (the
 * model list may have changed since). A refusal stores nothing.
 */
export async function createBatch(r: JobsRequest): Promise<Response> {
  const b = await readCreateBody(r.req, bodyDeadlines(r.deps.bodyReadTimeoutMs, r.deps.limits.uploadMinBytesPerS));
  const { input_file_id: fileId, endpoint, completion_window: window } = b;
  if (typeof fileId !== "string" || fileId === "") throw invalid("input_file_id must be a file id", "input_file_id");
  if (typeof endpoint !== "string" || !isBatchEndpoint(endpoint)) throw invalid(`endpoint must be one of ${BATCH_ENDPOINTS.join(", ")}`, "endpoint");
  const windowMs = typeof window === "string" ? COMPLETION_WINDOWS[window] : undefined;
  if (windowMs === undefined) throw invalid("completion_window must be '24h'", "completion_window");
  const metadata = parseMetadata(b.metadata);
  const { store } = r.deps;
  const file = await store.getFile(r.tenant, fileId);
  if (!file) throw noSuchFile(fileId, "input_file_id");
  if (file.purpose !== "batch")
    throw invalid(`file ${fileId} has purpose '${file.purpose}'; a batch needs a file uploaded with purpose 'batch'`, "input_file_id");
  if (file.endpoint !== endpoint) {
    throw new LlmgwError("INVALID_BATCH_LINE", `line 1: url '${file.endpoint}' is not the batch's endpoint '${endpoint}'`, { param: "input_file_id" });
  }
  const content = await store.getFileContent(r.tenant, fileId);
  if (!content) throw noSuchFile(fileId, "input_file_id");
  const { limits } = r.deps;
  const validator = new BatchInputValidator({
    maxLines: limits.maxLines,
    knownModel: r.deps.knownModel,
    maxLineBytes: limits.maxLineBytes,
    maxDepth: limits.maxLineDepth,
  });
  // The model of line 1, before any line is stored (the batch carries it).
  const model = file.model;
  if (model === null) throw invalid(`file ${fileId} holds no requests`, "input_file_id");
  const doc = newBatchDoc({
    id: newBatchId(),
    tenant: r.tenant,
    endpoint,
    model,
    inputFileId: fileId,
    completionWindow: window as string,
    createdAtMs: r.now,
    expiresAtMs: r.now + windowMs,
    metadata,
  });
  let batch: Awaited<ReturnType<typeof store.createBatch>>;
  try {
    batch = await store.createBatch(doc, linesOf(content.body, validator));
  } catch (err) {
    throw asStorageError(err, "creating the batch");
  }
  r.deps.runner?.wake();
  return json(batchObject(batch));
}

/**
 * Lines of the stored input file, checked again as they are read, in chunks
 * of at most CREATE_CHUNK_LINES lines and CREATE_CHUNK_BYTES of bodies. The
 * event loop gets a turn between chunks: a file's reads resolve without
 * waiting and the embedded store writes synchronously, so without it a
 * 10,000-line, 80 MB file was checked and stored in one 330 ms stall.
 */
async function* linesOf(body: Blob | ReadableStream<Uint8Array>, validator: BatchInputValidator): AsyncGenerator<BatchLine[]> {
  const stream = body instanceof Blob ? body.stream() : body;
  let chunk: BatchLine[] = [];
  let bytes = 0;
  for await (const data of stream) {
    for (const line of validator.push(data)) {
      chunk.push(line);
      bytes += line.body.length;
      if (chunk.length >= CREATE_CHUNK_LINES || bytes >= CREATE_CHUNK_BYTES) {
        yield chunk;
        chunk = [];
        bytes = 0;
        await new Promise<void>((r) => setImmediate(r));
      }
    }
  }
  chunk.push(...validator.end().lines);
  if (chunk.length > 0) yield chunk;
}

export async function getBatch(r: JobsRequest): Promise<Response> {
  const b = await r.deps.store.getBatch(r.tenant, r.id);
  if (!b) throw noSuchBatch(r.id);
  return json(batchObject(b));
}

export async function listBatches(r: JobsRequest): Promise<Response> {
  const after = r.url.searchParams.get("after") ?? undefined;
  const limit = limitParam(r.url, BATCHES_PAGE_DEFAULT, BATCHES_PAGE_MAX);
  try {
    return json(listObject(await r.deps.store.listBatches(r.tenant, { after, limit }), batchObject));
  } catch (err) {
    if (err instanceof UnknownCursorError) throw invalid(err.message, "after");
    throw err;
  }
}

/**
 * OpenAI: a validating or in-progress batch goes to `cancelling` (lines
 * already sent finish and keep their results) and then `cancelled`, with
 * partial results in the output file. Cancelling twice answers the batch as
 * it is; a batch that is finalizing or finished cannot be cancelled (409).
 */
export async function cancelBatch(r: JobsRequest): Promise<Response> {
  const { store } = r.deps;
  const b = await store.getBatch(r.tenant, r.id);
  if (!b) throw noSuchBatch(r.id);
  if (b.status === "cancelling" || b.status === "cancelled") return json(batchObject(b));
  const updated = await store.updateBatch(b.id, ["validating", "in_progress"], {
    status: "cancelling",
    cancellingAtMs: r.now,
    waitingReason: null,
    waitingSinceMs: null,
  });
  if (!updated) {
    const now = (await store.getBatch(r.tenant, r.id)) ?? b;
    throw new LlmgwError("BATCH_NOT_CANCELLABLE", `batch ${b.id} is ${now.status}; only a validating or in_progress batch can be cancelled`, {
      param: "batch_id",
    });
  }
  r.deps.runner?.wake();
  return json(batchObject(updated));
}
