/**
 * The background runner's `send` inside serve: one background response
 * through the gateway's own request pipeline, in process, as its tenant in
 * the band it was created in — quota, admission, scoring, deadlines,
 * retries, metrics and the audit line as for any request — its answer
 * stored by the pipeline's conversation step under the response's id.
 */

import type { GatewayContext } from "../gateway/context.ts";
import type { ConversationTarget } from "../gateway/pipeline/conversation-state.ts";
import { handleInference } from "../gateway/pipeline/pipeline.ts";
import type { BackgroundSend } from "../jobs/background-responses.ts";

function errorOf(text: string, status: number): { code: string; message: string } {
  try {
    const e = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
    if (typeof e?.message === "string") return { code: typeof e.code === "string" ? e.code : "server_error", message: e.message };
  } catch {
    // not JSON: described below
  }
  return { code: "server_error", message: `the request ended with status ${status}` };
}

export function backgroundSend(ctx: GatewayContext): BackgroundSend {
  return async function sendBackground(req, target, signal) {
    const principal = Object.freeze({ tenant: target.tenant, band: req.band, bandName: req.bandName });
    const request = new Request(`http://background.llmgw.internal${req.path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(req.body),
      signal,
    });
    const conversation: ConversationTarget = { id: target.id };
    const res = await handleInference(ctx, request, undefined, "responses", req.path, { principal, conversation });
    const text = await res.text();
    await conversation.stored;
    return res.ok ? { status: res.status } : { status: res.status, error: errorOf(text, res.status) };
  };
}
