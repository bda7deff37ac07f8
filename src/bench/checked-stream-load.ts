/**
 * Closed-loop streaming traffic that checks every answer, for scenarios where
 * the fleet changes under load (drain, scale, a killed agent): each client
 * sends a streaming chat request and, when it ends, the next. A request
 * counts as ok only with a 200 and a stream that ends with `data: [DONE]` and
 * carries no error event (the gateway ends a broken stream with an explicit
 * error event, which a byte count would take for a success). Answers are
 * counted per endpoint from the gateway's `x-llmgw-endpoint` header.
 */

interface CheckedLoadOptions {
  /** The chat completions URL. */
  url: string;
  clients: number;
  model: string;
  maxTokens: number;
  headers?: Record<string, string>;
}

interface CheckedRequest {
  /** Wall-clock ms (Date.now()): when it was sent and when it ended, comparable with the gateway's own timestamps. */
  sentAt: number;
  endedAt: number;
  ok: boolean;
  status: number;
  /** x-llmgw-endpoint (undefined when the gateway named none). */
  endpoint: string | undefined;
  /** Why it is not ok: "HTTP 503 …", "truncated: …", "error event: …", "transport: …". */
  failure?: string;
}

interface CheckedLoadReport {
  requests: number;
  ok: number;
  /** Answers that were not a 200. */
  non200: number;
  /** 200s whose stream did not end with [DONE], or carried an error event. */
  broken: number;
  /** ok requests by the endpoint that served them. */
  byEndpoint: Record<string, number>;
  firstFailures: string[];
}

interface CheckedLoad {
  /** Every request so far, in the order they ended. */
  readonly results: readonly CheckedRequest[];
  report(filter?: (r: CheckedRequest) => boolean): CheckedLoadReport;
  /** Stop sending; requests in flight finish (they are not cut). */
  stop(): Promise<CheckedLoadReport>;
}

/** What is wrong with a stream's text (undefined: it ended with [DONE] and carried no error). */
export function streamDefect(text: string): string | undefined {
  const data = text
    .split("\n\n")
    .map((e) => e.trim())
    .filter((e) => e.startsWith("data:"))
    .map((e) => e.slice(5).trim());
  const error = data.find((d) => d.startsWith("{") && d.includes('"error"') && isErrorEvent(d));
  if (error) return `error event: ${error.slice(0, 300)}`;
  if (data.at(-1) !== "[DONE]") return `truncated: ${data.length} events, last ${JSON.stringify(data.at(-1)?.slice(0, 100))}`;
  return undefined;
}

function isErrorEvent(d: string): boolean {
  try {
    const v: unknown = JSON.parse(d);
    return typeof v === "object" && v !== null && "error" in v;
  } catch {
    return false;
  }
}

async function once(o: CheckedLoadOptions, body: string): Promise<CheckedRequest> {
  const sentAt = Date.now();
  const done = (r: Omit<CheckedRequest, "sentAt" | "endedAt">): CheckedRequest => ({ sentAt, endedAt: Date.now(), ...r });
  try {
    const res = await fetch(o.url, { method: "POST", headers: { "content-type": "application/json", ...o.headers }, body });
    const endpoint = res.headers.get("x-llmgw-endpoint") ?? undefined;
    const text = await res.text();
    if (res.status !== 200) return done({ ok: false, status: res.status, endpoint, failure: `HTTP ${res.status} ${text.slice(0, 300)}` });
    const defect = streamDefect(text);
    return done(defect ? { ok: false, status: 200, endpoint, failure: defect } : { ok: true, status: 200, endpoint });
  } catch (err) {
    return done({ ok: false, status: 0, endpoint: undefined, failure: `transport: ${err instanceof Error ? err.message : String(err)}` });
  }
}

export function summarize(results: readonly CheckedRequest[]): CheckedLoadReport {
  const report: CheckedLoadReport = { requests: results.length, ok: 0, non200: 0, broken: 0, byEndpoint: {}, firstFailures: [] };
  for (const r of results) {
    if (r.ok) {
      report.ok++;
      const key = r.endpoint ?? "(unnamed)";
      report.byEndpoint[key] = (report.byEndpoint[key] ?? 0) + 1;
      continue;
    }
    if (r.status === 200) report.broken++;
    else report.non200++;
    if (report.firstFailures.length < 5) report.firstFailures.push(r.failure ?? "failed");
  }
  return report;
}

export function startCheckedLoad(o: CheckedLoadOptions): CheckedLoad {
  const results: CheckedRequest[] = [];
  let running = true;
  let seq = 0;
  const loops = Array.from({ length: o.clients }, async (_, client) => {
    while (running) {
      // A new prompt each time: prefix caching must not make later requests cheaper than earlier ones.
      const body = JSON.stringify({
        model: o.model,
        stream: true,
        max_tokens: o.maxTokens,
        messages: [{ role: "user", content: `checked load client ${client} request ${seq++}` }],
      });
      const r = await once(o, body);
      results.push(r);
      // A failing gateway answers at once: do not spin on it.
      if (!r.ok) await Bun.sleep(20);
    }
  });
  return {
    results,
    report: (filter) => summarize(filter ? results.filter(filter) : results),
    async stop() {
      running = false;
      await Promise.all(loops);
      return summarize(results);
    },
  };
}
