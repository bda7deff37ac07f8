/**
 * The agent's HTTP API on Bun.serve: bearer-token auth, then
 * GET /v1/inventory, GET /v1/state, GET|PUT|DELETE /v1/replicas/{id},
 * PUT|DELETE /v1/replicas/{id}/adapters/{name} (a LoRA adapter loaded into
 * or unloaded from the replica's engine); PUT and DELETE checked against the
 * reconciler's fencing token first.
 * GET /health answers without a token (liveness probes carry none).
 * Every error is OpenAI-shaped through src/shared/errors.ts; every answer is
 * checked against the gateway ↔ agent types in src/protocol/agent-messages.ts.
 */
import {
  type AgentAdapterResponse,
  type AgentDeleteReplicaResponse,
  type AgentInventory,
  type AgentPutReplicaResponse,
  type AgentReplicaStatus,
  type AgentState,
  FENCING_TOKEN_HEADER,
} from "../protocol/agent-messages.ts";
import { tokenMatches } from "../shared/bearer.ts";
import { asLlmgwError, errorResponse, LlmgwError } from "../shared/errors.ts";
import { logger } from "../shared/logger.ts";
import { decodePathSegment, malformedPathError } from "../shared/path-segment.ts";
import type { AgentService } from "./agent-service.ts";
import type { FencingGuard } from "./fencing.ts";

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

async function readJson(req: Request): Promise<unknown> {
  try {
    return await req.json();
  } catch {
    throw new LlmgwError("INVALID_JSON", "request body is not valid JSON");
  }
}

export { tokenMatches };

/** A path segment, decoded (the whole path was checked first: this never throws in practice). */
function segment(raw: string): string {
  const decoded = decodePathSegment(raw);
  if (decoded === undefined) throw new LlmgwError("INVALID_REQUEST", `malformed percent-encoding in the path segment '${raw.slice(0, 200)}'`);
  return decoded;
}

const REPLICA_PATH = /^\/v1\/replicas\/([^/]+)$/;
const ADAPTER_PATH = /^\/v1\/replicas\/([^/]+)\/adapters\/([^/]+)$/;

export function createAgentHandler(service: AgentService, token: string, fencing?: FencingGuard): (req: Request) => Promise<Response> {
  return async function agentHandler(req: Request): Promise<Response> {
    const url = new URL(req.url);
    try {
      if (url.pathname === "/health" && req.method === "GET") return json({ status: "ok" });
      if (!tokenMatches(req.headers.get("authorization"), token)) {
        throw new LlmgwError("UNAUTHORIZED", "missing or invalid bearer token for the llmgw agent");
      }
      const malformed = malformedPathError(url.pathname);
      if (malformed) throw malformed;
      if (url.pathname === "/v1/inventory") {
        if (req.method !== "GET") throw new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} not allowed on ${url.pathname}`);
        return json((await service.inventory()) satisfies AgentInventory);
      }
      if (url.pathname === "/v1/state") {
        if (req.method !== "GET") throw new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} not allowed on ${url.pathname}`);
        return json((await service.state()) satisfies AgentState);
      }
      const a = ADAPTER_PATH.exec(url.pathname);
      if (a?.[1] && a[2]) {
        const id = segment(a[1]);
        const name = segment(a[2]);
        if (req.method !== "PUT" && req.method !== "DELETE") throw new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} not allowed on ${url.pathname}`);
        fencing?.check(req.headers.get(FENCING_TOKEN_HEADER));
        const outcome = req.method === "PUT" ? await service.loadAdapter(id, name, await readJson(req)) : await service.unloadAdapter(id, name);
        return json({ replica: id, adapter: name, outcome } satisfies AgentAdapterResponse);
      }
      const m = REPLICA_PATH.exec(url.pathname);
      if (m?.[1]) {
        const id = segment(m[1]);
        if (req.method === "PUT" || req.method === "DELETE") fencing?.check(req.headers.get(FENCING_TOKEN_HEADER));
        switch (req.method) {
          case "GET":
            return json(service.status(id) satisfies AgentReplicaStatus);
          case "PUT": {
            const { outcome, replica } = await service.putReplica(id, await readJson(req));
            return json({ outcome, replica } satisfies AgentPutReplicaResponse, outcome === "created" ? 201 : 200);
          }
          case "DELETE": {
            if (!(await service.deleteReplica(id))) throw new LlmgwError("NOT_FOUND", `no replica '${id}' on this node`);
            return json({ id, deleted: true } satisfies AgentDeleteReplicaResponse);
          }
          default:
            throw new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} not allowed on ${url.pathname}`);
        }
      }
      throw new LlmgwError("NOT_FOUND", `no route ${req.method} ${url.pathname}`);
    } catch (err) {
      const e = asLlmgwError(err);
      if (e.code === "INTERNAL_ERROR") logger().error({ err, path: url.pathname }, "agent request failed");
      return errorResponse(e);
    }
  };
}
