/** A batch runner's `send` that posts each line straight to an engine (a sim-engine in tests), standing in for the gateway's request path. */
import { expect } from "bun:test";
import type { SendLine } from "../../src/jobs/batch-runner.ts";

export function engineSend(apiBase: string): SendLine {
  return async (line, signal) => {
    const res = await fetch(`${apiBase}${line.url}`, {
      method: line.method,
      headers: { "content-type": "application/json" },
      body: line.body,
      signal,
    });
    const text = await res.text();
    let body = text;
    try {
      JSON.parse(text);
    } catch {
      body = JSON.stringify({ error: { message: text, type: "server_error", param: null, code: String(res.status) } });
    }
    return { status: res.status, body, requestId: res.headers.get("x-request-id") ?? undefined };
  };
}

/** A JSONL batch input of `n` chat requests, custom_id `req-<i>`. */
export function chatBatchJsonl(n: number, model: string, maxTokens = 2): string {
  let out = "";
  for (let i = 0; i < n; i++) {
    const body = { model, max_tokens: maxTokens, messages: [{ role: "user", content: `question ${i}` }] };
    out += `${JSON.stringify({ custom_id: `req-${i}`, method: "POST", url: "/v1/chat/completions", body })}\n`;
  }
  return out;
}

/** Check a batch output file of chatBatchJsonl(n) lines: every line answered 200, every custom_id `req-<i>` exactly once. */
export function expectEveryLineOnce(outputText: string, n: number): void {
  const lines = outputText
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { custom_id: string; response: { status_code: number } });
  expect(lines.filter((l) => l.response.status_code !== 200)).toEqual([]);
  expect(lines.length).toBe(n);
  expect(new Set(lines.map((l) => l.custom_id))).toEqual(new Set(Array.from({ length: n }, (_, i) => `req-${i}`)));
}
