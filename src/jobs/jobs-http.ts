/** Shared pieces of the Files and Batches routes: their dependencies, the per-request context, JSON answers and query parameters. */
import type { BatchConfig } from "../config/types.ts";
import { LlmgwError } from "../shared/errors.ts";
import type { UploadBudget, UploadLimits } from "./file-upload.ts";
import type { IdempotencyGate } from "./idempotency-gate.ts";
import type { JobsStore } from "./jobs-store.ts";

/** Who is asking: the gateway's authenticated principal (only the tenant matters here). */
export interface JobsPrincipal {
  readonly tenant: string;
}

export interface JobsRoutesDeps {
  store: JobsStore;
  /** Whether the gateway serves a model (name or alias), for upload validation. */
  knownModel: (name: string) => boolean;
  limits: UploadLimits & Pick<BatchConfig, "maxLines" | "maxLineBytes" | "maxLineDepth">;
  /** Bytes all uploads may hold in memory at once. */
  budget: UploadBudget;
  /** Deadline for each chunk of an upload (body_read_timeout_ms). */
  bodyReadTimeoutMs: number;
  /** Idempotency-Key on uploads, checked once the body is in (uploads stream theirs, so the data plane's wrapper does not read it). */
  idempotency?: IdempotencyGate;
  /** Told when a batch is created or cancelled, so it acts at once rather than at its next tick. */
  runner?: { wake(): void };
  now?: () => number;
}

/** What each route handler gets. */
export interface JobsRequest {
  req: Request;
  url: URL;
  tenant: string;
  /** The id segment of /v1/files/{id} or /v1/batches/{id}. */
  id: string;
  deps: JobsRoutesDeps;
  now: number;
}

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** `limit` query parameter: an integer in [1, max], or `fallback` when absent. */
export function limitParam(url: URL, fallback: number, max: number): number {
  const raw = url.searchParams.get("limit");
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new LlmgwError("INVALID_REQUEST", `limit must be an integer from 1 to ${max}`, { param: "limit" });
  return n;
}
