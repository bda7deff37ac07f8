/**
 * llmgw in front of an upstream that misbehaves the way hosted APIs and
 * overloaded engines do (an in-process Bun.serve on loopback; the gateway is
 * a real `llmgw serve`): one URL serving two models, one of them rate
 * limited with Retry-After; a transient 500; a finished stream without
 * [DONE]; JSON written with spaces; an event stream for a non-streaming
 * request; an answer cut mid-body; a 4xx that must give the tenant's tokens
 * back; a provider whose /v1/models lists other names and has no /health.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "bun";
import { counterValue, type Gateway, readSse, startGateway } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { startRogueEngine } from "../helpers/rogue-engine.ts";

let rogue: Server<undefined>;
let provider: Server<undefined>;
let gw: Gateway;
/** Requests the rogue engine saw, by model. */
const seen: Record<string, number> = {};
/** Per-model scripted answers (consumed in order; then the default answer). */
const script: Record<string, ("429" | "500" | "cut")[]> = {};

const KEY = "rogue-test-key-0001";
const auth = { authorization: `Bearer ${KEY}` };
const chunk = (content: string, finish: string | null = null) =>
  `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":${finish === null ? "null" : `"${finish}"`}}]}\n\n`;
const spacedUsage = `data: {"id": "c", "object": "chat.completion.chunk", "choices": [ ], "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}}\n\n`;

beforeAll(async () => {
  rogue = startRogueEngine(["busy", "free", "once", "nodone", "sse", "cut", "bad"], async (req) => {
    const body = (await req.json()) as { model: string; stream?: boolean };
    seen[body.model] = (seen[body.model] ?? 0) + 1;
    const next = script[body.model]?.shift();
    if (next === "429") return Response.json({ error: { message: "slow down", type: "rate_limit_error" } }, { status: 429, headers: { "retry-after": "1" } });
    if (next === "500") return Response.json({ error: { message: "transient" } }, { status: 500 });
    if (body.model === "bad") return Response.json({ error: { message: "unsupported parameter", type: "invalid_request_error" } }, { status: 400 });
    if (body.model === "sse" && !body.stream) return new Response(chunk("x") + "data: [DONE]\n\n", { headers: { "content-type": "text/event-stream" } });
    if (next === "cut" || body.model === "cut") {
      // A non-streaming answer whose connection dies half-way (declared longer than sent).
      const part = '{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hal';
      return new Response(
        new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode(part));
            setTimeout(() => c.error(new Error("engine died")), 20);
          },
        }),
        { headers: { "content-type": "application/json", "content-length": "4000" } },
      );
    }
    const sse = { "content-type": "text/event-stream" };
    // A finished answer, its usage written with spaces; "nodone" never sends [DONE].
    if (body.stream)
      return new Response(chunk("hi") + chunk("!", "stop") + spacedUsage + (body.model === "nodone" ? "" : "data: [DONE]\n\n"), { headers: sse });
    return Response.json({
      id: "c",
      object: "chat.completion",
      model: body.model,
      choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 },
    });
  });
  // A hosted provider: no /health, and /v1/models lists its own names, not ours.
  provider = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/v1/models") return Response.json({ object: "list", data: [{ id: "provider-internal-name", object: "model" }] });
      if (path === "/v1/chat/completions")
        return Response.json({
          id: "p",
          object: "chat.completion",
          choices: [{ index: 0, message: { role: "assistant", content: "from the provider" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
        });
      return new Response("not found", { status: 404 });
    },
  });
  gw = await startGateway(
    {
      auth: { keys: [{ key: KEY, tenant: "acme" }] },
      tenants: [{ name: "acme", tokens_per_minute: 100_000 }],
      retry: { max_attempts: 3, min_per_s: 1000, backoff_ms: 0 },
      health: { poll_interval_ms: 100 },
      body_read_timeout_ms: 500,
      max_body_bytes: 64 * 1024,
      models: [{ name: "busy", fallback: ["free"] }, { name: "free" }],
      endpoints: [
        { id: "rogue", url: `http://127.0.0.1:${rogue.port}`, models: ["busy", "free", "once", "nodone", "sse", "cut", "bad"] },
        { id: "provider", url: `http://127.0.0.1:${provider.port}`, models: ["hosted"], models_source: "static" },
      ],
    },
    2,
  );
});

afterAll(async () => {
  await stopAll();
  rogue.stop(true);
  provider.stop(true);
});

const chat = (model: string, stream = true, headers: Record<string, string> = auth) =>
  fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers,
    body: JSON.stringify({ model, stream, max_tokens: 5, messages: [{ role: "user", content: "hello" }] }),
  });

describe("before the first byte", () => {
  test("a 429 for one model cools down that model only: the other model on the same URL keeps serving", async () => {
    script.busy = ["429", "429", "429", "429", "429", "429"];
    const r = await chat("busy");
    // busy failed, its fallback free on the same endpoint answered.
    expect(r.status).toBe(200);
    expect(await r.text()).toContain("data: [DONE]");
    for (let i = 0; i < 3; i++) expect((await chat("free")).status).toBe(200);
    const ep = (await gw.endpoints()).find((e) => e.id === "rogue") as unknown as { circuit: string; model_circuits: Record<string, string> };
    expect(ep.model_circuits.busy).toBe("open");
    expect(ep.model_circuits.free).toBeUndefined();
    expect(ep.circuit).toBe("closed");
    script.busy = [];
    await waitUntil(
      async () =>
        ((await gw.endpoints()).find((e) => e.id === "rogue") as unknown as { model_circuits: Record<string, string> }).model_circuits.busy === undefined,
      { what: "busy's cool-down to end" },
    );
  });

  test("the only endpoint answers 429 with Retry-After: 1 → the same endpoint is retried about a second later", async () => {
    script.busy = ["429"];
    const before = seen.busy ?? 0;
    const t0 = performance.now();
    const r = await chat("busy", false);
    const ms = performance.now() - t0;
    expect(r.status).toBe(200);
    expect(r.headers.get("x-llmgw-attempts")).toBe("2");
    expect(seen.busy! - before).toBe(2);
    expect(ms).toBeGreaterThanOrEqual(900);
    expect(ms).toBeLessThan(2_500);
    await waitUntil(
      async () =>
        ((await gw.endpoints()).find((e) => e.id === "rogue") as unknown as { model_circuits: Record<string, string> }).model_circuits.busy === undefined,
      { what: "busy's cool-down to end" },
    );
  });

  test("one transient 500 on the only endpoint → retried there at once, and the answer arrives", async () => {
    script.once = ["500"];
    const t0 = performance.now();
    const r = await chat("once");
    expect(r.status).toBe(200);
    expect(r.headers.get("x-llmgw-attempts")).toBe("2");
    expect(performance.now() - t0).toBeLessThan(500);
    expect(counterValue(await gw.metrics(), "llmgw_same_endpoint_retries_total", { reason: "status_5xx" })).toBeGreaterThan(0);
  });
});

describe("answers", () => {
  test("a finished stream that ends without [DONE] is complete: the client gets [DONE], the outcome is ok, nothing counts against the engine", async () => {
    const failuresBefore = counterValue(await gw.metrics(), "llmgw_upstream_failures_total", { endpoint: "rogue" });
    const okBefore = counterValue(await gw.metrics(), "llmgw_requests_total", { model: "nodone", outcome: "ok" });
    const payloads = await readSse(await chat("nodone"));
    expect(payloads.at(-1)).toBe("[DONE]");
    expect(payloads.some((p) => p.includes('"error"'))).toBe(false);
    const m = await gw.metrics();
    expect(counterValue(m, "llmgw_requests_total", { model: "nodone", outcome: "ok" })).toBe(okBefore + 1);
    expect(counterValue(m, "llmgw_upstream_failures_total", { endpoint: "rogue" })).toBe(failuresBefore);
  });

  test("usage written with spaces is read: the tokens are counted", async () => {
    const before = counterValue(await gw.metrics(), "llmgw_tokens_total", { model: "free", kind: "completion" });
    await (await chat("free")).text();
    expect(counterValue(await gw.metrics(), "llmgw_tokens_total", { model: "free", kind: "completion" })).toBe(before + 2);
  });

  test("an event stream for a non-streaming request is an engine error (502), not a 200", async () => {
    const r = await chat("sse", false);
    expect(r.status).toBe(502);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("UPSTREAM_MALFORMED");
  });

  test("a connection cut during a non-streaming answer is UPSTREAM_STREAM_TRUNCATED, with no runtime hint in the message", async () => {
    const r = await chat("cut", false);
    expect(r.status).toBe(502);
    const err = ((await r.json()) as { error: { code: string; message: string } }).error;
    expect(err.code).toBe("UPSTREAM_STREAM_TRUNCATED");
    expect(err.message).not.toContain("verbose");
  });

  test("an engine 4xx gives the tenant its estimated tokens back", async () => {
    const remaining = async () => Number((await chat("free", false)).headers.get("x-ratelimit-remaining-tokens"));
    const before = await remaining();
    for (let i = 0; i < 5; i++) expect((await chat("bad", false)).status).toBe(400);
    // Five rejected requests of ~260 estimated tokens each cost nothing; the two probes cost 13 each.
    expect(await remaining()).toBeGreaterThanOrEqual(before - 13 - 5);
  });

  test("a provider whose /v1/models lists other names and has no /health serves its configured model (models_source: static)", async () => {
    const r = await chat("hosted", false);
    expect(r.status).toBe(200);
    expect(((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe("from the provider");
  });
});

describe("clients", () => {
  test("every data-plane route refuses a request without a key (401, OpenAI's shape)", async () => {
    for (const [method, path] of [
      ["POST", "/v1/chat/completions"],
      ["POST", "/v1/completions"],
      ["POST", "/v1/embeddings"],
      ["GET", "/v1/models"],
    ] as const) {
      const r = await fetch(`${gw.api}${path}`, {
        method,
        ...(method === "POST" ? { body: JSON.stringify({ model: "free", prompt: "x", input: "x", messages: [{ role: "user", content: "x" }] }) } : {}),
      });
      expect({ path, status: r.status }).toEqual({ path, status: 401 });
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("INVALID_API_KEY");
    }
    expect((await fetch(`${gw.api}/v1/models`, { headers: auth })).status).toBe(200);
    expect((await fetch(`${gw.api}/health`)).status).toBe(200);
  });

  test("a declared body over the limit gets llmgw's own 413, after authentication", async () => {
    const noKey = await rawRequest(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: ${10 * 1024 * 1024}\r\n\r\n`);
    expect(noKey).toContain("401");
    const withKey = await rawRequest(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\ncontent-length: ${10 * 1024 * 1024}\r\n\r\n`,
    );
    expect(withKey).toContain("413");
    expect(withKey).toContain('"code":"BODY_TOO_LARGE"');
  });

  test("a client that declares a body and sends less is cut at the body-read deadline (408), not held", async () => {
    const t0 = performance.now();
    const answer = await rawRequest(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\ncontent-length: 1000\r\n\r\n{"model":`,
      5_000,
    );
    expect(answer).toContain("408");
    expect(answer).toContain('"code":"BODY_READ_TIMEOUT"');
    expect(performance.now() - t0).toBeLessThan(2_000);
  });
});

/** Send raw bytes on one TCP connection and collect what comes back until it closes or `ms` pass. */
async function rawRequest(text: string, ms = 2_000): Promise<string> {
  const port = Number(new URL(gw.api).port);
  let out = "";
  let done: () => void = () => {};
  const closed = new Promise<void>((r) => (done = r));
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      data(_s, d) {
        out += new TextDecoder().decode(d);
        if (out.includes("\r\n\r\n") && /"error"/.test(out)) done();
      },
      close() {
        done();
      },
      error() {
        done();
      },
    },
  });
  socket.write(text);
  await Promise.race([closed, Bun.sleep(ms)]);
  socket.end();
  return out;
}
