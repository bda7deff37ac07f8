/**
 * The Files and Batches API over plain Bun Request/Response (the data plane
 * is raw Bun.serve): `createJobsRoutes(deps)` returns `handleJobsRoute(req,
 * principal)`, which answers /v1/files… and /v1/batches… and returns
 * undefined for any other path. Every failure is an OpenAI-shaped error.
 */
import { asLlmgwError, errorResponse, LlmgwError } from "../shared/errors.ts";
import { logger } from "../shared/logger.ts";
import { decodePathSegment } from "../shared/path-segment.ts";
import { cancelBatch, createBatch, getBatch, listBatches } from "./batches-routes.ts";
import { deleteFile, getFile, getFileContent, listFiles, uploadFile } from "./files-routes.ts";
import type { JobsPrincipal, JobsRequest, JobsRoutesDeps } from "./jobs-http.ts";
import { asStorageError } from "./storage-errors.ts";

type Handler = (r: JobsRequest) => Promise<Response>;

/** Path shape → allowed methods. `id` is one path segment. */
const ROUTES: { pattern: RegExp; methods: Partial<Record<string, Handler>> }[] = [
  { pattern: /^\/v1\/files$/, methods: { POST: uploadFile, GET: listFiles } },
  { pattern: /^\/v1\/files\/([^/]+)$/, methods: { GET: getFile, DELETE: deleteFile } },
  { pattern: /^\/v1\/files\/([^/]+)\/content$/, methods: { GET: getFileContent } },
  { pattern: /^\/v1\/batches$/, methods: { POST: createBatch, GET: listBatches } },
  { pattern: /^\/v1\/batches\/([^/]+)$/, methods: { GET: getBatch } },
  { pattern: /^\/v1\/batches\/([^/]+)\/cancel$/, methods: { POST: cancelBatch } },
];

const OURS = /^\/v1\/(files|batches)(\/|$)/;

export type JobsRouteHandler = (req: Request, principal: JobsPrincipal) => Promise<Response | undefined>;

export function createJobsRoutes(deps: JobsRoutesDeps): JobsRouteHandler {
  const now = deps.now ?? Date.now;
  return async function handleJobsRoute(req, principal) {
    const url = new URL(req.url);
    const path = url.pathname;
    if (!OURS.test(path)) return undefined;
    for (const route of ROUTES) {
      const m = route.pattern.exec(path);
      if (!m) continue;
      const handler = route.methods[req.method];
      if (!handler) {
        const allow = Object.keys(route.methods).join(", ");
        return errorResponse(new LlmgwError("METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use ${allow}`), { allow });
      }
      // A malformed percent-escape names nothing.
      const id = decodePathSegment(m[1] ?? "");
      if (id === undefined) return errorResponse(new LlmgwError("NOT_FOUND", `no object at ${path}`));
      try {
        return await handler({ req, url, tenant: principal.tenant, id, deps, now: now() });
      } catch (err) {
        const e = asLlmgwError(asStorageError(err, `${req.method} ${path}`));
        if (e.code === "INTERNAL_ERROR") logger().error({ err: e.message, path }, "jobs route failed");
        return errorResponse(e);
      }
    }
    // /v1/batches/x/y …: ours, but nothing lives there.
    return errorResponse(new LlmgwError("NOT_FOUND", `no route for ${req.method} ${path}`));
  };
}
