/** POST/GET /v1/files, GET/DELETE /v1/files/{id}, GET /v1/files/{id}/content: batch input files (validated on upload) and batch output files. */
import { LlmgwError } from "../shared/errors.ts";
import { receiveUpload } from "./file-upload.ts";
import { newFileId } from "./job-ids.ts";
import { type JobsRequest, json, limitParam } from "./jobs-http.ts";
import { UnknownCursorError } from "./jobs-store.ts";
import { fileObject, listObject } from "./openai-objects.ts";
import { asStorageError } from "./storage-errors.ts";

/** OpenAI's default and maximum page size for GET /v1/files. */
const FILES_PAGE_MAX = 10_000;

export function noSuchFile(id: string, param = "file_id"): LlmgwError {
  return new LlmgwError("NOT_FOUND", `No such File object: ${id}`, { param });
}

/** The upload streams to storage (file-upload.ts); it becomes a file only once whole, checked, within quota and (with Idempotency-Key) not a replay. */
export async function uploadFile(r: JobsRequest): Promise<Response> {
  const { deps } = r;
  const fileId = newFileId();
  const up = await receiveUpload({
    req: r.req,
    tenant: r.tenant,
    store: deps.store,
    limits: deps.limits,
    budget: deps.budget,
    knownModel: deps.knownModel,
    bodyReadTimeoutMs: deps.bodyReadTimeoutMs,
    fileId,
  });
  let kept = false;
  try {
    if (up.purpose !== "batch") {
      throw new LlmgwError("INVALID_REQUEST", "purpose must be 'batch' (the only purpose llmgw stores)", { param: "purpose" });
    }
    const check = deps.idempotency ? await deps.idempotency.checkFingerprint(r.req, r.tenant, up.fingerprint, r.req.signal) : { kind: "none" as const };
    if (check.kind === "replay") return check.response;
    const stored = {
      id: fileId,
      tenant: r.tenant,
      filename: up.filename,
      purpose: "batch" as const,
      bytes: up.content.bytes,
      createdAtMs: r.now,
      endpoint: up.input.endpoint,
      model: up.input.model,
      lineCount: up.input.lineCount,
    };
    try {
      await deps.store.putFile(stored, up.content);
      kept = true;
    } catch (err) {
      if (check.kind === "run") await check.abandon();
      throw asStorageError(err, "storing the upload");
    }
    const res = json(fileObject(stored));
    return check.kind === "run" ? check.record(res) : res;
  } finally {
    if (!kept) await up.content.abort();
  }
}

export async function listFiles(r: JobsRequest): Promise<Response> {
  const order = r.url.searchParams.get("order") ?? "desc";
  if (order !== "asc" && order !== "desc") throw new LlmgwError("INVALID_REQUEST", "order must be 'asc' or 'desc'", { param: "order" });
  const purpose = r.url.searchParams.get("purpose") ?? undefined;
  const after = r.url.searchParams.get("after") ?? undefined;
  const limit = limitParam(r.url, FILES_PAGE_MAX, FILES_PAGE_MAX);
  try {
    const page = await r.deps.store.listFiles(r.tenant, { after, limit, order, purpose });
    return json(listObject(page, fileObject));
  } catch (err) {
    if (err instanceof UnknownCursorError) throw new LlmgwError("INVALID_REQUEST", err.message, { param: "after" });
    throw err;
  }
}

export async function getFile(r: JobsRequest): Promise<Response> {
  const f = await r.deps.store.getFile(r.tenant, r.id);
  if (!f) throw noSuchFile(r.id);
  return json(fileObject(f));
}

export async function getFileContent(r: JobsRequest): Promise<Response> {
  const content = await r.deps.store.getFileContent(r.tenant, r.id);
  if (!content) throw noSuchFile(r.id);
  // A Blob (a file on disk) is sent by the kernel; a stream is pulled as the client reads it.
  return new Response(content.body, { headers: { "content-type": "application/octet-stream", "content-length": String(content.size) } });
}

export async function deleteFile(r: JobsRequest): Promise<Response> {
  if (!(await r.deps.store.deleteFile(r.tenant, r.id))) throw noSuchFile(r.id);
  return json({ id: r.id, object: "file", deleted: true });
}
