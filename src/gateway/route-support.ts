/**
 * Which routes each endpoint serves. An endpoint may list its routes in the
 * config (`endpoints[].routes`: an engine built without a tokenizer route, a
 * hosted API with no /rerank); otherwise it is taken to serve every route
 * until it answers a path with the web framework's own 404 — FastAPI's
 * `{"detail":"Not Found"}` (vLLM, SGLang), or OpenAI's "Invalid URL" —
 * which says the route is not there, as opposed to a model it does not
 * serve (vLLM's `{"error":{…}}` 404). From then on that path is never sent
 * to it again; the attempt loop moves the request to another endpoint.
 */
import type { EndpointConfig } from "../config/types.ts";
import type { Route } from "../metrics/names.ts";

/** Endpoints whose missing paths are remembered at most (fleet replicas come and go; the oldest are forgotten first). */
const MAX_LEARNED_ENDPOINTS = 4096;

const decoder = new TextDecoder();

/** Whether an engine's 404 body says the path itself does not exist (not a model it lacks). */
export function routeMissing(body: Uint8Array | undefined): boolean {
  if (body === undefined) return false;
  const text = decoder.decode(body.subarray(0, 512));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return /^\s*(404 page not found|not found)\s*$/i.test(text);
  }
  if (typeof json !== "object" || json === null) return false;
  const o = json as { detail?: unknown; error?: { message?: unknown } };
  if (o.detail === "Not Found") return true;
  return typeof o.error?.message === "string" && o.error.message.startsWith("Invalid URL");
}

export class RouteSupport {
  /** endpoint id → the routes its config lists. */
  private readonly configured = new Map<string, ReadonlySet<Route>>();
  /** endpoint id → paths it answered with a route-missing 404. */
  private readonly missing = new Map<string, Set<string>>();

  constructor(endpoints: readonly EndpointConfig[]) {
    for (const e of endpoints) if (e.routes !== undefined) this.configured.set(e.id, new Set(e.routes));
  }

  /** Whether any endpoint serves less than every route (nothing to check per request otherwise). */
  get limited(): boolean {
    return this.configured.size > 0 || this.missing.size > 0;
  }

  /** Whether endpoint `id` takes `path` (of `route`). */
  serves(id: string, route: Route, path: string): boolean {
    const routes = this.configured.get(id);
    if (routes !== undefined && !routes.has(route)) return false;
    return this.missing.get(id)?.has(path) !== true;
  }

  /** Endpoint `id` answered `path` with a 404 whose `body` says the route is missing: never send it that path again. True when it did. */
  learn(id: string, path: string, body: Uint8Array | undefined): boolean {
    if (!routeMissing(body)) return false;
    let paths = this.missing.get(id);
    if (paths === undefined) {
      if (this.missing.size >= MAX_LEARNED_ENDPOINTS) this.missing.delete(this.missing.keys().next().value!);
      this.missing.set(id, (paths = new Set()));
    }
    paths.add(path);
    return true;
  }
}
