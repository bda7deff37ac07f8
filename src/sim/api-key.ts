/**
 * `sim-engine --api-key KEY`, as vLLM's: every /v1 request but OPTIONS must
 * carry `Authorization: Bearer KEY`, else 401 `{"error":"Unauthorized"}`
 * (vllm/entrypoints/openai/server_utils.py, AuthenticationMiddleware);
 * /health, /metrics, /tokenize and the /sim control API stay open.
 */
import { createHash, timingSafeEqual } from "node:crypto";

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** The check for `key`: a 401 Response for a request it refuses, undefined for one it lets through. */
export function apiKeyGate(key: string): (req: Request, path: string) => Response | undefined {
  const want = digest(key);
  return function refuseWithoutKey(req, path) {
    if (req.method === "OPTIONS" || !path.startsWith("/v1")) return undefined;
    const [scheme, ...rest] = (req.headers.get("authorization") ?? "").split(" ");
    // Compared as digests of equal length, in constant time, as vLLM does.
    if (scheme?.toLowerCase() === "bearer" && timingSafeEqual(digest(rest.join(" ")), want)) return undefined;
    return Response.json({ error: "Unauthorized" }, { status: 401 });
  };
}
