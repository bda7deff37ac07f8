/**
 * One streaming request, timed as a user sees it: time to the first token,
 * the gaps between chunks that carry tokens (vLLM's benchmark calls these
 * ITL), the whole duration, the tokens the final usage chunk reports, the
 * endpoint the gateway named, and what went wrong if anything did. Each
 * event's JSON is read (a few µs) so role-only, usage and error events are
 * told apart from tokens; a stream that ends without `[DONE]` or with an
 * error event is a failure, never a short success.
 */
import type { LogHistogram } from "./log-histogram.ts";

export interface CompletionTiming {
  status: number;
  /** x-llmgw-endpoint (undefined without a gateway in front). */
  endpoint?: string;
  /** Send → first chunk with a token, ms. */
  ttftMs?: number;
  /** Send → end of the answer (or of the failure), ms: how long the request was open. */
  durationMs: number;
  /** Send → last chunk with a token, ms: vLLM's E2EL (its `latency`; the usage chunk and [DONE] after it do not count). */
  e2elMs?: number;
  /** usage.completion_tokens, else the token-bearing events seen. */
  outputTokens: number;
  promptTokens?: number;
  /** TPOT as vLLM defines it: (E2EL − TTFT) / (tokens − 1) = (last token chunk − first) / (tokens − 1), ms. */
  tpotMs?: number;
  /** What failed: `HTTP 503 ADMISSION_QUEUE_FULL`, `stream error …`, `no [DONE]`, `transport: …`. */
  error?: string;
}

interface StreamEvent {
  choices?: { text?: string | null; delta?: { content?: string | null } }[];
  usage?: { completion_tokens?: number; prompt_tokens?: number } | null;
  error?: { code?: string | null; type?: string; message?: string };
}

/** The error code (or type) an OpenAI-shaped error body names. */
function errorName(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: { code?: unknown; type?: unknown } }).error;
    const name = typeof e?.code === "string" && e.code !== "" ? e.code : e?.type;
    return typeof name === "string" ? ` ${name}` : "";
  } catch {
    return "";
  }
}

export async function timedCompletion(
  url: string,
  body: string,
  opts: { headers?: Record<string, string>; signal?: AbortSignal; gaps?: LogHistogram; sentAt?: number },
): Promise<CompletionTiming> {
  const start = opts.sentAt ?? performance.now();
  const t: CompletionTiming = { status: 0, durationMs: 0, outputTokens: 0 };
  let firstAt = NaN;
  let lastAt = NaN;
  let tokenEvents = 0;
  let done = false;
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...opts.headers },
      body,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    t.status = res.status;
    const endpoint = res.headers.get("x-llmgw-endpoint");
    if (endpoint !== null) t.endpoint = endpoint;
    if (res.status !== 200 || !res.body) {
      t.error = `HTTP ${res.status}${errorName(await res.text().catch(() => ""))}`;
      return t;
    }
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body) {
      const now = performance.now();
      buf += decoder.decode(chunk, { stream: true });
      let tokensHere = 0;
      let end: number;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = event.startsWith("data:") ? event.slice(5).trim() : "";
        if (data === "") continue;
        if (data === "[DONE]") {
          done = true;
          continue;
        }
        let e: StreamEvent;
        try {
          e = JSON.parse(data) as StreamEvent;
        } catch {
          t.error ??= "stream event is not JSON";
          continue;
        }
        if (e.error) t.error ??= `stream error${e.error.code ? ` ${e.error.code}` : e.error.type ? ` ${e.error.type}` : ""}`;
        if (e.usage) {
          if (typeof e.usage.completion_tokens === "number") t.outputTokens = e.usage.completion_tokens;
          if (typeof e.usage.prompt_tokens === "number") t.promptTokens = e.usage.prompt_tokens;
        }
        const c = e.choices?.[0];
        if ((c?.text ?? c?.delta?.content ?? "") !== "") tokensHere++;
      }
      if (tokensHere === 0) continue;
      if (tokenEvents === 0) firstAt = now;
      else opts.gaps?.add(now - lastAt);
      lastAt = now;
      tokenEvents += tokensHere;
    }
    if (!done) t.error ??= "no [DONE]";
    // vLLM's benchmark fails an answer without a token too: it has no TTFT to measure.
    if (tokenEvents === 0) t.error ??= "no token in the answer";
  } catch (err) {
    t.error ??= `transport: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    t.durationMs = performance.now() - start;
    if (tokenEvents > 0) {
      t.ttftMs = firstAt - start;
      t.e2elMs = lastAt - start;
    }
    if (t.outputTokens === 0) t.outputTokens = tokenEvents;
    if (t.outputTokens > 1 && tokenEvents > 0) t.tpotMs = (lastAt - firstAt) / (t.outputTokens - 1);
  }
  return t;
}
