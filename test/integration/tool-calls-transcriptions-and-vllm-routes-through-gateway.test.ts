/**
 * Tool-call streams and the rest of vLLM's routes through llmgw: the real
 * `openai` client reads a chat stream of tool-call deltas and a Responses
 * stream of function_call events relayed untouched, the gateway counts the
 * calls, and a stream that breaks inside a tool call ends with the explicit
 * error (never a continuation that splices arguments);
 * client.audio.transcriptions.create goes through (multipart, size-limited);
 * rerank, score, pooling and classify by plain HTTP; /tokenize reaches the
 * one endpoint that serves it (a tiny engine of this test's own; the
 * sim-engines here are configured without it), an older engine's FastAPI 404
 * for it is learned after one request, and an endpoint configured for some
 * routes never gets the others.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { auditLine, counterValue, type Gateway, readSse, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

const weather = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"] },
  },
};

let sims: Sim[];
let gw: Gateway;
let client: OpenAI;
/** Requests the tiny tokenizer engine got, by path. */
const tinyHits = new Map<string, number>();
let tiny: ReturnType<typeof Bun.serve>;
/** Requests the older engine (no /tokenize: FastAPI's 404) got, by path. */
const olderHits = new Map<string, number>();
let older: ReturnType<typeof Bun.serve>;
let dataDir: string;

/** A tokenizer-only engine: vLLM's /tokenize and /detokenize shapes, FastAPI's 404 for everything else. */
function startTinyTokenizer(): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      tinyHits.set(path, (tinyHits.get(path) ?? 0) + 1);
      if (path === "/health") return new Response(null, { status: 200 });
      if (path === "/tokenize") {
        const body = (await req.json()) as { prompt: string };
        const tokens = [...body.prompt].map((c) => c.charCodeAt(0));
        return Response.json({ count: tokens.length, max_model_len: 4096, tokens, token_strs: null });
      }
      if (path === "/detokenize") {
        const body = (await req.json()) as { tokens: number[] };
        return Response.json({ prompt: String.fromCharCode(...body.tokens) });
      }
      return new Response('{"detail":"Not Found"}', { status: 404, headers: { "content-type": "application/json" } });
    },
  });
}

/** An engine of a version without /tokenize: health, and FastAPI's 404 for every other path. */
function startOlderEngine(): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      olderHits.set(path, (olderHits.get(path) ?? 0) + 1);
      if (path === "/health") return new Response(null, { status: 200 });
      return new Response('{"detail":"Not Found"}', { status: 404, headers: { "content-type": "application/json" } });
    },
  });
}

/** Every route but the tokenizer's: the sim-engines serve /tokenize too, and this test wants one endpoint that does. */
const SIM_ROUTES = ["chat", "completions", "embeddings", "responses", "score", "rerank", "pooling", "classify", "transcriptions"];

beforeAll(async () => {
  const args = ["--model", "m", "--itl-ms", "2", "--output-len", "12"];
  sims = await Promise.all([startSim(args), startSim(args)]);
  tiny = startTinyTokenizer();
  older = startOlderEngine();
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-tools-routes-"));
  gw = await startGateway(
    {
      data_dir: dataDir,
      max_audio_bytes: 96 * 1024,
      health: { poll_interval_ms: 100 },
      circuit_breaker: { failure_threshold: 1000 },
      endpoints: [
        ...sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: ["m"], routes: SIM_ROUTES })),
        { id: "tokenizer", url: `http://127.0.0.1:${tiny.port}`, models: ["m"], models_source: "static", routes: ["tokenize", "detokenize"] },
        { id: "older", url: `http://127.0.0.1:${older.port}`, models: ["m"], models_source: "static" },
      ],
    },
    4,
  );
  client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: "none", maxRetries: 0 });
});

afterAll(async () => {
  tiny?.stop(true);
  older?.stop(true);
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const post = (path: string, body: unknown) =>
  fetch(`${gw.api}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const toolCalls = async (route: string) => counterValue(await gw.metrics(), "llmgw_tool_calls_total", { route });

describe("tool-call streams through llmgw", () => {
  test("chat: tool_choice required streams a call in pieces, finish_reason tool_calls, relayed untouched and counted", async () => {
    const before = await toolCalls("chat");
    const stream = await client.chat.completions.create({
      model: "m",
      stream: true,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: [weather],
      tool_choice: "required",
    });
    let args = "";
    let name: string | undefined;
    let id: string | undefined;
    let finish: string | null | undefined;
    let pieces = 0;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      for (const call of delta?.tool_calls ?? []) {
        name ??= call.function?.name;
        id ??= call.id;
        args += call.function?.arguments ?? "";
        pieces++;
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(name).toBe("get_weather");
    expect(id).toMatch(/^chatcmpl-tool-/);
    expect(pieces).toBeGreaterThan(3);
    expect(Object.keys(JSON.parse(args) as object).sort()).toEqual(["city", "days"]);
    expect(finish).toBe("tool_calls");
    expect(await toolCalls("chat")).toBe(before + 1);
  });

  test("chat, not streaming, a named function: message.tool_calls, counted", async () => {
    const before = await toolCalls("chat");
    const r = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "Weather?" }],
      tools: [weather],
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const call = r.choices[0]!.message.tool_calls![0]! as { type: string; function: { name: string; arguments: string } };
    expect(call.type).toBe("function");
    expect(call.function.name).toBe("get_weather");
    expect(typeof (JSON.parse(call.function.arguments) as { city: unknown }).city).toBe("string");
    expect(await toolCalls("chat")).toBe(before + 1);
  });

  test("Responses: a function_call item streams its arguments as deltas, and the completed response holds the call", async () => {
    const before = await toolCalls("responses");
    const tools = [{ type: "function" as const, name: "get_weather", parameters: weather.function.parameters, strict: false }];
    const stream = await client.responses.create({ model: "m", input: "Weather in Oslo?", tools, tool_choice: "required", stream: true });
    let args = "";
    let added: { type: string; name?: string } | undefined;
    let done: string | undefined;
    let completed: OpenAI.Responses.Response | undefined;
    for await (const ev of stream) {
      if (ev.type === "response.output_item.added") added = ev.item as { type: string; name?: string };
      if (ev.type === "response.function_call_arguments.delta") args += ev.delta;
      if (ev.type === "response.function_call_arguments.done") done = ev.arguments;
      if (ev.type === "response.completed") completed = ev.response;
    }
    expect(added).toMatchObject({ type: "function_call", name: "get_weather" });
    expect(done).toBe(args);
    expect((completed!.output[0] as { type: string; arguments: string }).arguments).toBe(args);
    expect(await toolCalls("responses")).toBe(before + 1);
  });

  test("a stream that breaks inside a tool call ends with the explicit error event, never a spliced continuation", async () => {
    await Promise.all(sims.map((s) => s.configure({ fault_rate: 1, fault_types: ["cut:3"] })));
    try {
      const metrics = await gw.metrics();
      const refused = counterValue(metrics, "llmgw_stream_recoveries_total", { result: "not_continuable" });
      const res = await post("/v1/chat/completions", {
        model: "m",
        stream: true,
        messages: [{ role: "user", content: "Weather?" }],
        tools: [weather],
        tool_choice: "required",
      });
      const events = await readSse(res);
      expect(events.at(-1)).toBe("[DONE]");
      const error = JSON.parse(events.at(-2)!) as { error: { code: string } };
      expect(error.error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
      const calls = events.slice(0, -2).map((e) => JSON.parse(e) as { choices: { delta: { tool_calls?: unknown[] } }[] });
      expect(calls.filter((c) => c.choices[0]?.delta.tool_calls !== undefined).length).toBe(3);
      expect(counterValue(await gw.metrics(), "llmgw_stream_recoveries_total", { result: "not_continuable" })).toBe(refused + 1);
      const audit = await auditLine(gw, res.headers.get("x-request-id")!);
      expect((audit.recoveries as { result: string; reason: string }[])[0]).toMatchObject({ result: "not_continuable", reason: "tools" });
    } finally {
      await Promise.all(sims.map((s) => s.configure({ fault_rate: 0, fault_types: [] })));
    }
  });
});

describe("vLLM's other routes through llmgw", () => {
  test("client.audio.transcriptions.create: the multipart form goes through; an upload over max_audio_bytes is a 413", async () => {
    const audio = new Uint8Array(64 * 1024).map((_, i) => (i * 31) % 251);
    const t = await client.audio.transcriptions.create({ file: await toFile(audio, "speech.wav", { type: "audio/wav" }), model: "m" });
    expect(t.text.length).toBeGreaterThan(0);
    const again = await client.audio.transcriptions.create({ file: await toFile(audio, "speech.wav", { type: "audio/wav" }), model: "m" });
    expect(again.text).toBe(t.text); // the same audio, the same words: the bytes arrived intact
    try {
      await client.audio.transcriptions.create({ file: await toFile(new Uint8Array(128 * 1024), "long.wav"), model: "m" });
      throw new Error("expected a 413");
    } catch (err) {
      expect((err as { status?: number }).status).toBe(413);
    }
  });

  test("rerank (/rerank, /v1/rerank, /v2/rerank), score, pooling and classify by plain HTTP, with usage counted", async () => {
    for (const path of ["/rerank", "/v1/rerank", "/v2/rerank"]) {
      const res = await post(path, { model: "m", query: "city at night", documents: ["a quiet harbour", "the city at night", "a mountain"], top_n: 2 });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { results: { index: number; relevance_score: number }[]; usage: { total_tokens: number } };
      expect(body.results.length).toBe(2);
      expect(body.results[0]!.relevance_score).toBeGreaterThanOrEqual(body.results[1]!.relevance_score);
      const audit = await auditLine(gw, res.headers.get("x-request-id")!);
      expect(audit.route).toBe(path);
      expect((audit.tokens as { prompt: number }).prompt).toBe(body.usage.total_tokens);
    }
    const score = await post("/v1/score", { model: "m", text_1: "query", text_2: ["one", "two"] });
    expect(((await score.json()) as { data: unknown[] }).data.length).toBe(2);
    const pooling = await post("/pooling", { model: "m", input: ["x", "y"] });
    expect(((await pooling.json()) as { data: { data: number[] }[] }).data[0]!.data.length).toBeGreaterThan(0);
    const classify = await post("/classify", { model: "m", input: "great" });
    expect(((await classify.json()) as { data: { probs: number[] }[] }).data[0]!.probs.length).toBe(2);
    expect(counterValue(await gw.metrics(), "llmgw_requests_total", { route: "rerank", outcome: "ok" })).toBe(3);
    const streamed = await post("/rerank", { model: "m", query: "q", documents: ["d"], stream: true });
    expect(streamed.status).toBe(400);
  });

  test("/tokenize reaches the endpoint that serves it; chat never goes to the tokenizer-only endpoint", async () => {
    for (let i = 0; i < 6; i++) {
      const res = await post("/tokenize", { model: "m", prompt: "hello" });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { count: number }).count).toBe(5);
    }
    const de = await post("/detokenize", { model: "m", tokens: [104, 105] });
    expect(((await de.json()) as { prompt: string }).prompt).toBe("hi");
    for (let i = 0; i < 4; i++) await client.chat.completions.create({ model: "m", max_tokens: 2, messages: [{ role: "user", content: `hi ${i}` }] });
    expect(tinyHits.get("/v1/chat/completions") ?? 0).toBe(0);
    expect(tinyHits.get("/tokenize")).toBe(6);
  });

  test("an engine's FastAPI 404 for a route is learned: the route is not sent to it again, and with nobody serving it the answer is 404 ROUTE_NOT_SERVED", async () => {
    // The sims are configured without /tokenize and the older engine answers it with FastAPI's 404: with the tokenizer gone, nobody serves it.
    tiny.stop(true);
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await post("/tokenize", { model: "m", prompt: "hello" });
      codes.push(((await res.json()) as { error?: { code: string } }).error?.code ?? String(res.status));
    }
    expect(codes.every((c) => c === "ROUTE_NOT_SERVED" || c === "UPSTREAM_CONNECT_FAILED" || c === "NO_READY_ENDPOINT")).toBe(true);
    expect(codes.at(-1)).toBe("ROUTE_NOT_SERVED");
    // Over both tests (11 tokenize requests), the older engine was asked once: its 404 was learned then.
    expect(olderHits.get("/tokenize") ?? 0).toBeLessThanOrEqual(1);
    // A generation route it never served is learned the same way, while the sims answer.
    for (let i = 0; i < 6; i++) await client.chat.completions.create({ model: "m", max_tokens: 2, messages: [{ role: "user", content: `older ${i}` }] });
    expect(olderHits.get("/v1/chat/completions") ?? 0).toBeLessThanOrEqual(1);
  });
});
