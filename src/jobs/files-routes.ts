/** POST/GET /v1/files, GET/DELETE /v1/files/{id}, GET /v1/files/{id}/content: batch input files (validated on upload) and batch output files. */
import { readBodyUpTo } from "../shared/bounded-body.ts";
import { LlmgwError } from "../shared/errors.ts";
import { parseBatchInput } from "./batch-input.ts";
import { newFileId } from "./job-ids.ts";
import { UnknownCursorError } from "./jobs-store.ts";
import { json, limitParam, type JobsRequest } from "./jobs-http.ts";
import { fileObject, listObject } from "./openai-objects.ts";

/** Room for the multipart boundaries and part headers around the file itself. */
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;
/** OpenAI's default and maximum page size for GET /v1/files. */
const FILES_PAGE_MAX = 10_000;

export function noSuchFile(id: string, param = "file_id"): LlmgwError {
  return new LlmgwError("NOT_FOUND", `No such File object: ${id}`, { param });
}

function tooLarge(limit: number): LlmgwError {
  return new LlmgwError("BODY_TOO_LARGE", `the file exceeds the limit of ${limit} bytes (batch.max_file_bytes)`, { param: "file" });
}

export async function uploadFile(r: JobsRequest): Promise<Response> {
  const { maxFileBytes, maxLines } = r.deps.limits;
  const type = r.req.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("multipart/form-data")) {
    throw new LlmgwError("INVALID_REQUEST", "expected a multipart/form-data upload with the fields 'file' and 'purpose'");
  }
  const raw = await readBodyUpTo(r.req, maxFileBytes + MULTIPART_OVERHEAD_BYTES);
  if (raw === undefined) throw tooLarge(maxFileBytes);
  const form = await new Response(raw, { headers: { "content-type": type } }).formData().catch(() => undefined);
  if (form === undefined) throw new LlmgwError("INVALID_REQUEST", "the multipart/form-data body could not be parsed");
  const purpose = form.get("purpose");
  if (purpose !== "batch") {
    throw new LlmgwError("INVALID_REQUEST", "purpose must be 'batch' (the only purpose llmgw stores)", { param: "purpose" });
  }
  const file = form.get("file");
  if (!(file instanceof Blob)) throw new LlmgwError("INVALID_REQUEST", "a 'file' field with the JSONL content is required", { param: "file" });
  if (file.size > maxFileBytes) throw tooLarge(maxFileBytes);
  const content = new Uint8Array(await file.arrayBuffer());
  const parsed = parseBatchInput(content, { maxLines, knownModel: r.deps.knownModel });
  const stored = {
    id: newFileId(),
    tenant: r.tenant,
    filename: file instanceof File && file.name !== "" ? file.name : "upload.jsonl",
    purpose: "batch" as const,
    bytes: content.byteLength,
    createdAtMs: r.now,
    endpoint: parsed.endpoint,
    model: parsed.model,
    lineCount: parsed.lines.length,
  };
  await r.deps.store.putFile(stored, content);
  return json(fileObject(stored));
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
  return new Response(content, { headers: { "content-type": "application/octet-stream" } });
}

export async function deleteFile(r: JobsRequest): Promise<Response> {
  if (!(await r.deps.store.deleteFile(r.tenant, r.id))) throw noSuchFile(r.id);
  return json({ id: r.id, object: "file", deleted: true });
}
