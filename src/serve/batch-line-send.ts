/**
 * The batch runner's `send` inside serve: one batch line through the
 * gateway's own request pipeline, in process (no HTTP loop back through the
 * listener), in the batch band as the batch's tenant, with the batch id on
 * its audit line. Quota, the response cache, the shed gate and admission
 * apply as to any request; their refusals come back as answers the runner
 * reads (429 GPU_SATURATED: the line waits).
 */
import type { AdmissionConfig } from "../config/types.ts";
import type { Principal } from "../gateway/api-keys.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { handleInference } from "../gateway/pipeline/pipeline.ts";
import type { SendLine, SendResult } from "../jobs/batch-runner.ts";
import { usageOf } from "../jobs/line-send.ts";
import type { Route } from "../metrics/names.ts";
import { errorBody } from "../shared/errors.ts";

const LINE_ROUTES: Record<string, Route> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/v1/embeddings": "embeddings",
};

/** The band batch lines run in: the one named "batch", else the lowest (bands are listed highest priority first). */
function batchBand(admission: Pick<AdmissionConfig, "bands">): number {
  const named = admission.bands.findIndex((b) => b.name === "batch");
  return named >= 0 ? named : admission.bands.length - 1;
}

/**
 * The answer as the runner keeps it: its JSON text as it came. It is parsed
 * once, to check that it is JSON (it is spliced into the output file as it
 * is) and to read its usage, and re-serialised only when it spans lines.
 */
function readResult(status: number, text: string, headers: Headers): SendResult {
  const retryAfter = Number(headers.get("retry-after") ?? NaN);
  const meta = { requestId: headers.get("x-request-id") ?? undefined, ...(Number.isFinite(retryAfter) ? { retryAfterS: retryAfter } : {}) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Our own answers are JSON: this is the engine's. A 2xx that is not JSON is the engine's failure (retried, then in the error file).
    const malformed = JSON.stringify(errorBody("UPSTREAM_MALFORMED", `the answer is not JSON: ${text.slice(0, 200)}`));
    return { status: status >= 200 && status < 300 ? 502 : status, body: malformed, ...meta };
  }
  // A line break between tokens (a pretty-printed answer) would split the output file's JSONL line: only then is it re-serialised.
  const body = text.includes("\n") || text.includes("\r") ? JSON.stringify(parsed) : text;
  return { status, body, usage: usageOf(parsed), ...meta };
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
      // A declared length lets the pipeline take the body in one read rather than chunk by chunk.
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(line.body)) },
      body: line.body,
      signal,
    });
    const res = await handleInference(ctx, req, undefined, LINE_ROUTES[line.url]!, line.url, { principal, batchId: meta.batchId });
    return readResult(res.status, await res.text(), res.headers);
  };
}
