/**
 * llmgw in front of an engine that misbehaves in ways the sim-engine's fault
 * menu does not cover: a non-streaming answer far larger than
 * max_response_bytes (declared, or chunked without a length), an SSE event
 * that never ends (before and after the first byte). The gateway must answer
 * each with a clear error, hold no more than its limits in memory, and stay
 * healthy. Also: a client body with a UTF-8 BOM reaches the engine without it
 * (Python's json, inside vLLM and SGLang, rejects a BOM).
 *
 * The engine is an in-process Bun.serve on loopback (it must do what no real
 * engine should); the gateway is a real `llmgw serve` process.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "bun";
import { counterValue, type Gateway, readSse, startGateway } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { startRogueEngine } from "../helpers/rogue-engine.ts";

const MAX_RESPONSE_BYTES = 100_000;
const enc = new TextEncoder();

let rogue: Server<undefined>;
/** Bytes of the last chat body the engine received. */
let lastChatBody = new Uint8Array(0);
let gw: Gateway;

const chunk = (content: string) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":null}]}\n\n`;

/** A body stream of `total` bytes of filler after `head`, in 64 KiB chunks, with no blank line. */
function endless(head: string, total: number): ReadableStream<Uint8Array> {
  let sent = 0;
  const filler = new Uint8Array(64 * 1024).fill(120);
  return new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(enc.encode(head));
    },
    pull(c) {
      if (sent >= total) return c.close();
      sent += filler.length;
      c.enqueue(filler);
    },
  });
}

beforeAll(async () => {
  rogue = startRogueEngine([{ id: "m", owned_by: "rogue", max_model_len: 4096 }], async (req, path) => {
    const raw = new Uint8Array(await req.arrayBuffer());
    const body = JSON.parse(new TextDecoder().decode(raw)) as { input?: string; stream?: boolean; messages?: { content: string }[] };
    if (path === "/v1/embeddings") {
      const n = body.input === "small" ? 100 : 40_000; // ~2 KB vs ~800 KB of JSON
      const json = JSON.stringify({
        object: "list",
        data: [{ object: "embedding", index: 0, embedding: Array.from({ length: n }, (_, i) => i / n) }],
        model: "m",
        usage: { prompt_tokens: 1, total_tokens: 1 },
      });
      if (body.input === "chunked") return new Response(new Blob([json]).stream(), { headers: { "content-type": "application/json" } });
      return new Response(json, { headers: { "content-type": "application/json" } });
    }
    lastChatBody = raw;
    const what = body.messages?.[0]?.content ?? "";
    const sse = { "content-type": "text/event-stream" };
    if (what === "endless-first") return new Response(endless('data: {"id":"c","choices":[{"delta":{"content":"', 20 * 1024 * 1024), { headers: sse });
    if (what === "endless-later")
      return new Response(endless(chunk("hello") + 'data: {"id":"c","choices":[{"delta":{"content":"', 20 * 1024 * 1024), { headers: sse });
    return new Response(chunk("ok") + "data: [DONE]\n\n", { headers: sse });
  });
  gw = await startGateway(
    {
      max_response_bytes: MAX_RESPONSE_BYTES,
      retry: { max_attempts: 2, min_per_s: 1000, backoff_ms: 0 },
      health: { poll_interval_ms: 100 },
      endpoints: [
        { id: "r1", url: `http://127.0.0.1:${rogue.port}`, models: ["m"] },
        { id: "r2", url: `http://127.0.0.1:${rogue.port}`, models: ["m"] },
      ],
    },
    2,
  );
});

afterAll(async () => {
  await stopAll();
  rogue?.stop(true);
});

const post = (path: string, body: unknown) =>
  fetch(`${gw.api}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
  });

describe("non-streaming answers over max_response_bytes", () => {
  for (const input of ["big", "chunked"]) {
    test(`${input === "big" ? "declared length" : "no declared length"}: 502 UPSTREAM_RESPONSE_TOO_LARGE, not retried`, async () => {
      const res = await post("/v1/embeddings", { model: "m", input });
      const err = (await res.json()) as { error: { code: string; type: string; message: string } };
      expect(res.status).toBe(502);
      expect(err.error.code).toBe("UPSTREAM_RESPONSE_TOO_LARGE");
      expect(err.error.type).toBe("server_error");
      expect(err.error.message).toContain(String(MAX_RESPONSE_BYTES));
      // The same request would be as large anywhere: one attempt only.
      expect(res.headers.get("x-llmgw-attempts")).toBe("1");
    });
  }

  test("an answer under the limit passes through intact", async () => {
    const res = await post("/v1/embeddings", { model: "m", input: "small" });
    expect(res.status).toBe(200);
    const json = (await res.json()) as { data: { embedding: number[] }[] };
    expect(json.data[0]!.embedding).toHaveLength(100);
  });
});

describe("an SSE event that never ends", () => {
  test("before the first byte: 502 UPSTREAM_MALFORMED after trying the other endpoint", async () => {
    const res = await post("/v1/chat/completions", { model: "m", stream: true, messages: [{ role: "user", content: "endless-first" }] });
    const err = (await res.json()) as { error: { code: string } };
    expect(res.status).toBe(502);
    expect(err.error.code).toBe("UPSTREAM_MALFORMED");
    expect(res.headers.get("x-llmgw-attempts")).toBe("2");
  });

  test("after the first byte: the client gets the tokens so far, an explicit error event and [DONE]", async () => {
    const res = await post("/v1/chat/completions", { model: "m", stream: true, messages: [{ role: "user", content: "endless-later" }] });
    expect(res.status).toBe(200);
    const payloads = await readSse(res);
    expect(payloads[0]).toContain('"content":"hello"');
    expect(payloads.at(-2)).toContain('"code":"UPSTREAM_MALFORMED"');
    expect(payloads.at(-1)).toBe("[DONE]");
    expect(counterValue(await gw.metrics(), "llmgw_upstream_failures_total", { reason: "malformed" })).toBeGreaterThanOrEqual(3);
  });
});

test("a body with a UTF-8 BOM is accepted and forwarded without it", async () => {
  const json = enc.encode(JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "plain" }] }));
  const withBom = new Uint8Array(json.length + 3);
  withBom.set([0xef, 0xbb, 0xbf], 0);
  withBom.set(json, 3);
  const res = await post("/v1/chat/completions", withBom);
  expect(res.status).toBe(200);
  expect((await readSse(res)).at(-1)).toBe("[DONE]");
  expect(lastChatBody[0]).toBe(0x7b); // '{'
});

test("after all that, the gateway and its endpoints are healthy", async () => {
  const res = await post("/v1/chat/completions", { model: "m", stream: true, messages: [{ role: "user", content: "plain" }] });
  expect(res.status).toBe(200);
  expect((await readSse(res)).at(-1)).toBe("[DONE]");
  expect((await gw.endpoints()).every((e) => e.ready && e.inflight === 0)).toBe(true);
});
