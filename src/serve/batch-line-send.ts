/**
 * The batch runner's `send` inside serve: one batch line through the
 * gateway's own request pipeline, in process (no HTTP loop back through the
 * listener), in the batch band as the batch's tenant, with the batch id on
 * its audit line. Quota, the response cache, the shed gate and admission
 * apply as to any request; their refusals come back as answers the runner
 * reads (429 GPU_SATURATED: the line waits).
 */
import type { AdmissionConfig } from "../config/types.ts";
import type { SendLine, SendResult } from "../jobs/batch-runner.ts";
import type { Route } from "../metrics/names.ts";
import { errorBody } from "../shared/errors.ts";
import type { GatewayContext } from "../gateway/context.ts";
import type { Principal } from "../gateway/api-keys.ts";
import { handleInference } from "../gateway/pipeline/pipeline.ts";

const LINE_ROUTES: Record<string, Route> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/v1/embeddings": "embeddings",
};

/** The band batch lines run in: the one named "batch", else the lowest (bands are listed highest priority first). */
export function batchBand(admission: Pick<AdmissionConfig, "bands">): number {
  const named = admission.bands.findIndex((b) => b.name === "batch");
  return named >= 0 ? named : admission.bands.length - 1;
}

function readResult(status: number, text: string, headers: Headers): SendResult {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // Our own answers are JSON; an engine's non-JSON 2xx would be a malformed answer for the output file.
    body = errorBody("UPSTREAM_MALFORMED", `the answer is not JSON: ${text.slice(0, 200)}`);
  }
  const retryAfter = Number(headers.get("retry-after") ?? NaN);
  return { status, body, requestId: headers.get("x-request-id") ?? undefined, ...(Number.isFinite(retryAfter) ? { retryAfterS: retryAfter } : {}) };
}

export function batchLineSend(ctx: GatewayContext): SendLine {
  const band = batchBand(ctx.config.admission);
  const bandName = ctx.config.admission.bands[band]!.name;
  const principals = new Map<string, Principal>();
  return async function sendBatchLine(line, signal, meta) {
    let principal = principals.get(meta.tenant);
    if (principal === undefined) principals.set(meta.tenant, (principal = Object.freeze({ tenant: meta.tenant, band, bandName })));
    const req = new Request(`http://batch.llmgw.internal${line.url}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(line.body),
      signal,
    });
    const res = await handleInference(ctx, req, undefined, LINE_ROUTES[line.url]!, line.url, { principal, batchId: meta.batchId });
    return readResult(res.status, await res.text(), res.headers);
  };
}
