/**
 * The data plane's Files and Batches routes (/v1/files…, /v1/batches…):
 * authenticated like every data route, POSTs idempotent like inference
 * (Idempotency-Key: batch creation runs once), then the jobs routes
 * (src/jobs/), each tenant seeing only its own files and batches.
 */

import type { Config } from "../../config/types.ts";
import { handleIdempotently } from "../../jobs/idempotency-gate.ts";
import type { GatewayJobs } from "../../jobs/jobs-service.ts";
import { bodyDeadlines, bodyReadWhole, declaresBody } from "../../shared/bounded-body.ts";
import { asLlmgwError, errorResponse, LlmgwError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/logger.ts";
import { type AuthGateDeps, authenticateRoute } from "../gates/auth.ts";

/** Room for the multipart boundaries and part headers around an uploaded file. */
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

export const JOBS_PATH = /^\/v1\/(files|batches)(\/|$)/;

/** What the Files and Batches routes use: the auth gate's, the jobs service (store opened on first use), the upload limits, the log. */
export type JobsHandlerDeps = AuthGateDeps & {
  readonly jobs: Pick<GatewayJobs, "opened">;
  readonly config: Pick<Config, "batch" | "bodyReadTimeoutMs">;
  readonly log: Pick<Logger, "error">;
};

export async function handleJobs(ctx: JobsHandlerDeps, req: Request): Promise<Response> {
  const principal = authenticateRoute(ctx, req);
  if (principal instanceof Response) return principal;
  let res: Response;
  try {
    const jobs = await ctx.jobs.opened();
    const bodyLimit = ctx.config.batch.maxFileBytes + MULTIPART_OVERHEAD_BYTES;
    const deadlines = bodyDeadlines(ctx.config.bodyReadTimeoutMs, ctx.config.batch.uploadMinBytesPerS);
    res = await handleIdempotently(
      jobs.idempotency,
      req,
      principal.tenant,
      bodyLimit,
      async (r) => {
        const answer = await jobs.routes(r, principal);
        return answer ?? errorResponse(new LlmgwError("NOT_FOUND", `no route for ${r.method} ${new URL(r.url).pathname}`));
      },
      deadlines,
    );
  } catch (err) {
    const e = asLlmgwError(err);
    if (e.code === "INTERNAL_ERROR") ctx.log.error({ err: e.message, path: new URL(req.url).pathname }, "files/batches request failed");
    res = errorResponse(e);
  }
  // A refusal before the body was read whole (too large, over quota): close,
  // or Bun drains what the client still sends for as long as it sends it,
  // holding the socket. One after the body was read keeps the connection.
  if (res.status >= 400 && declaresBody(req) && !bodyReadWhole(req)) res.headers.set("connection", "close");
  return res;
}
