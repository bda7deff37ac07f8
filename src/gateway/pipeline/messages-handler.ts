/**
 * Anthropic's Messages API routes (POST /v1/messages, /v1/messages/count_tokens)
 * around the inference pipeline: the key Anthropic's clients send as
 * `x-api-key` is taken as a bearer key, and every error leaves in
 * Anthropic's shape (`{"type":"error","error":{"type","message"}}`, its type
 * from the status, llmgw's stable code kept beside it), the gateway's own and
 * an engine's alike, so the Anthropic SDKs raise their typed errors
 * (NotFoundError, RateLimitError …). Headers (Retry-After, Connection:
 * close, x-request-id) stay as the pipeline set them.
 */
import type { Server } from "bun";
import type { Route } from "../../metrics/names.ts";
import { anthropicErrorBody } from "../../shared/anthropic-errors.ts";
import { errorResponse, LlmgwError } from "../../shared/errors.ts";
import { handleInference, type PipelineDeps } from "./pipeline.ts";

/** An error answer re-shaped as Anthropic's (one already in that shape, as an engine serving the API writes it, passes as it is). */
async function anthropicShaped(res: Response): Promise<Response> {
  if (res.status < 400) return res;
  const text = await res.text();
  let message = text.slice(0, 500) || `HTTP ${res.status}`;
  let code: unknown;
  try {
    const json = JSON.parse(text) as { type?: unknown; error?: { message?: unknown; code?: unknown } };
    if (json.type === "error") return new Response(text, { status: res.status, headers: res.headers });
    if (typeof json.error?.message === "string") message = json.error.message;
    code = json.error?.code;
  } catch {
    // not JSON: the text is the message
  }
  const body = anthropicErrorBody(res.status, message);
  const headers = new Headers(res.headers);
  headers.set("content-type", "application/json");
  headers.delete("content-length");
  return new Response(JSON.stringify(typeof code === "string" ? { ...body, error: { ...body.error, code } } : body), { status: res.status, headers });
}

export async function handleMessages(ctx: PipelineDeps, req: Request, server: Server<undefined> | undefined, route: Route, path: string): Promise<Response> {
  if (req.method !== "POST")
    return anthropicShaped(errorResponse(new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use POST`), { allow: "POST" }));
  // Anthropic's clients send their key as x-api-key; the auth gate reads Authorization.
  if (!req.headers.has("authorization")) {
    const key = req.headers.get("x-api-key");
    if (key !== null) req.headers.set("authorization", `Bearer ${key}`);
  }
  return anthropicShaped(await handleInference(ctx, req, server, route, path));
}
