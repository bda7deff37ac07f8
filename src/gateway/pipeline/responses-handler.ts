/**
 * The stored responses of the Responses API, as OpenAI documents them:
 * GET /v1/responses/{id}, DELETE /v1/responses/{id},
 * GET /v1/responses/{id}/input_items (a cursor page: after, limit 1–100,
 * order desc by default) and POST /v1/responses/{id}/cancel (background
 * responses only). Authenticated like every data route; each tenant sees
 * only its own responses: another tenant's id, or an expired one, is a 404.
 */
import { deletedObject, type InputItemsQuery, RESPONSE_ID, RUNNING } from "../../jobs/responses-objects.ts";
import type { GatewayResponses } from "../../jobs/responses-service.ts";
import { asLlmgwError, errorResponse, LlmgwError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/logger.ts";
import { type AuthGateDeps, authenticateRoute } from "../gates/auth.ts";

export const RESPONSE_PATH = new RegExp(`^/v1/responses/(${RESPONSE_ID.source.slice(1, -1)})(/input_items|/cancel)?$`);

const DEFAULT_PAGE = 20;
const MAX_PAGE = 100;

function json(body: unknown): Response {
  return new Response(typeof body === "string" ? body : JSON.stringify(body), { headers: { "content-type": "application/json" } });
}

function notFound(id: string): LlmgwError {
  return new LlmgwError("NOT_FOUND", `Response with id '${id}' not found.`);
}

function methodNotAllowed(method: string, path: string, allow: string): LlmgwError {
  return new LlmgwError("METHOD_NOT_ALLOWED", `${method} is not allowed on ${path}; use ${allow}`, { headers: { allow } });
}

function pageQuery(url: URL): InputItemsQuery {
  const limitText = url.searchParams.get("limit");
  const limit = limitText === null ? DEFAULT_PAGE : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
    throw new LlmgwError("INVALID_REQUEST", `'limit' must be an integer from 1 to ${MAX_PAGE}`, { param: "limit" });
  const order = url.searchParams.get("order") ?? "desc";
  if (order !== "asc" && order !== "desc") throw new LlmgwError("INVALID_REQUEST", "'order' must be 'asc' or 'desc'", { param: "order" });
  const after = url.searchParams.get("after");
  return after === null ? { limit, order } : { after, limit, order };
}

/** What the stored-responses routes use: the auth gate's, the responses service (store opened on first use), the log. */
export type ResponsesHandlerDeps = AuthGateDeps & {
  readonly responses: Pick<GatewayResponses, "opened">;
  readonly log: Pick<Logger, "error">;
};

export async function handleResponses(ctx: ResponsesHandlerDeps, req: Request, path: string): Promise<Response> {
  const principal = authenticateRoute(ctx, req);
  if (principal instanceof Response) return principal;
  try {
    return await route(ctx, req, path, principal.tenant);
  } catch (err) {
    const e = asLlmgwError(err);
    if (e.code === "INTERNAL_ERROR") ctx.log.error({ err: e.message, path }, "responses request failed");
    return errorResponse(e);
  }
}

async function route(ctx: ResponsesHandlerDeps, req: Request, path: string, tenant: string): Promise<Response> {
  const m = RESPONSE_PATH.exec(path)!;
  const id = m[1]!;
  const sub = m[2];
  const url = new URL(req.url);
  const { store, background } = await ctx.responses.opened();
  const now = Date.now();
  if (sub === "/input_items") {
    if (req.method !== "GET") throw methodNotAllowed(req.method, path, "GET");
    const query = pageQuery(url);
    const got = await store.inputItems(tenant, id, now, query);
    if ("missing" in got) {
      if (got.missing === "response") throw notFound(id);
      throw new LlmgwError("INVALID_REQUEST", `no input item with id '${query.after}' in response '${id}'`, { param: "after" });
    }
    return json(got.page);
  }
  if (sub === "/cancel") {
    if (req.method !== "POST") throw methodNotAllowed(req.method, path, "POST");
    const record = await store.get(tenant, id, now);
    if (record === undefined) throw notFound(id);
    const response = JSON.parse(record.response) as Record<string, unknown>;
    if (response.background !== true)
      throw new LlmgwError("INVALID_REQUEST", "Only responses created with background set to true can be cancelled.", { param: "response_id" });
    if (!RUNNING.includes(record.status)) return json(record.response); // finished: it stays as it finished
    const cancelled = JSON.stringify({ ...response, status: "cancelled" });
    const updated = await store.update(tenant, id, RUNNING, { status: "cancelled", response: cancelled, request: null, owner: null, leaseUntilMs: null });
    background.abort(tenant, id);
    // It finished while being cancelled: what it finished as.
    return json(updated?.response ?? (await store.get(tenant, id, now))?.response ?? cancelled);
  }
  switch (req.method) {
    case "GET": {
      if (url.searchParams.get("stream") === "true")
        throw new LlmgwError("INVALID_REQUEST", "llmgw does not replay a stored response as a stream; GET it without stream", { param: "stream" });
      const record = await store.get(tenant, id, now);
      if (record === undefined) throw notFound(id);
      return json(record.response);
    }
    case "DELETE": {
      if (!(await store.delete(tenant, id))) throw notFound(id);
      background.abort(tenant, id);
      return json(deletedObject(id));
    }
    default:
      throw methodNotAllowed(req.method, path, "GET, DELETE");
  }
}
