/** vLLM's `--api-key` in the sim-engine: which paths want `Authorization: Bearer KEY`, and the 401 vLLM answers without it. */

/**
 * Reachable without the key (vLLM's PUBLIC_ENDPOINTS in its
 * AuthenticationMiddleware), plus the sim's own /sim control API. Every other
 * path is guarded: vLLM guards every route it registers outside this list
 * (older releases guarded /v1 only, which this covers too).
 */
const PUBLIC_PATHS = ["/health", "/ping", "/load", "/version", "/metrics", "/docs", "/redoc", "/openapi.json", "/static", "/sim"];

function isPublic(path: string): boolean {
  return PUBLIC_PATHS.some((p) => path === p || path.startsWith(`${p}/`));
}

/** vLLM's refusal: `{"error":"Unauthorized"}`, 401 (a bare string, not OpenAI's error object). */
export function apiKeyRefusal(req: Request, path: string, key: string | undefined): Response | undefined {
  // CORS preflights pass, as in vLLM.
  if (key === undefined || req.method === "OPTIONS" || isPublic(path)) return undefined;
  const auth = req.headers.get("authorization") ?? "";
  const space = auth.indexOf(" ");
  const scheme = space < 0 ? auth : auth.slice(0, space);
  if (space > 0 && scheme.toLowerCase() === "bearer" && auth.slice(space + 1) === key) return undefined;
  return Response.json({ error: "Unauthorized" }, { status: 401 });
}
