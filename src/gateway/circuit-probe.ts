/**
 * One active probe of an open circuit: the smallest real request of the
 * route and model that failed — one token, streamed where the route streams,
 * so a first token that never comes fails it as it failed the clients — under
 * its own short deadline (dial, headers, first event and total together).
 * It is the gateway's own request, never a client's: nothing of it reaches a
 * client, and its tokens are no tenant's.
 */
import type { ProbeRoute, ProbeTarget, ProbeVerdict } from "./circuit-breaker.ts";

const PATHS: Record<ProbeRoute, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  embeddings: "/v1/embeddings",
  responses: "/v1/responses",
};

/** The probe's body: one token of the route, as small as a client's smallest request. */
export function probeBody(target: ProbeTarget): string {
  switch (target.route) {
    case "chat":
      return JSON.stringify({ model: target.model, messages: [{ role: "user", content: "ping" }], max_tokens: 1, stream: true });
    case "completions":
      return JSON.stringify({ model: target.model, prompt: "ping", max_tokens: 1, stream: true });
    case "embeddings":
      return JSON.stringify({ model: target.model, input: "ping" });
    case "responses":
      return JSON.stringify({ model: target.model, input: "ping", max_output_tokens: 1, stream: true, store: false });
  }
}

function retryAfterMs(value: string | null): number | undefined {
  const s = value === null ? NaN : Number(value);
  return Number.isFinite(s) && s >= 0 ? s * 1000 : undefined;
}

/** Whether a stream's first event arrived and is not an error: read until one complete event. */
async function firstEventOk(body: ReadableStream<Uint8Array>): Promise<boolean> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return false;
      text += decoder.decode(value, { stream: true });
      for (;;) {
        const end = /\r?\n\r?\n/.exec(text);
        if (end === null) break;
        const event = text.slice(0, end.index);
        text = text.slice(end.index + end[0].length);
        const data = event.split(/\r?\n/).find((l) => l.startsWith("data:"));
        if (data === undefined) continue; // a comment or keep-alive
        return !/^data:\s*\{\s*"error"/.test(data);
      }
    }
  } finally {
    void reader.cancel().catch(() => {});
  }
}

/**
 * Send the probe to `baseUrl` and judge it: a first event (or, for
 * embeddings, a 200) is a healthy engine; so is a 4xx other than 408 and 429
 * (the engine answered; the probe, not the engine, was refused — as a
 * client's 4xx counts); a 5xx, 408, 429, a deadline or a refused connection
 * is not.
 */
export async function sendProbe(
  baseUrl: string,
  target: ProbeTarget,
  timeoutMs: number,
  requestId: string,
  upstreamHeaders: Readonly<Record<string, string>> = {},
): Promise<ProbeVerdict> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error("probe deadline")), timeoutMs);
  try {
    const stream = target.route !== "embeddings";
    const res = await fetch(baseUrl + PATHS[target.route], {
      method: "POST",
      headers: { ...upstreamHeaders, "content-type": "application/json", accept: stream ? "text/event-stream" : "application/json", "x-request-id": requestId },
      body: probeBody(target),
      signal: controller.signal,
    });
    if (res.status === 429) {
      void res.body?.cancel().catch(() => {});
      const after = retryAfterMs(res.headers.get("retry-after"));
      return after === undefined ? { ok: false } : { ok: false, retryAfterMs: after };
    }
    if (res.status !== 200) {
      void res.body?.cancel().catch(() => {});
      return { ok: res.status >= 400 && res.status < 500 && res.status !== 408 };
    }
    if (!stream || !res.body) {
      await res.arrayBuffer();
      return { ok: true };
    }
    return { ok: await firstEventOk(res.body) };
  } catch {
    return { ok: false };
  } finally {
    clearTimeout(timer);
  }
}
