/**
 * A traced request followed from client to engine: a real `llmgw serve`
 * continues the client's W3C traceparent, exports a request span after the
 * GenAI semantic conventions with children for admission, scheduling and
 * each upstream attempt over OTLP/HTTP — protobuf (turned on by the standard
 * OTEL_* variables) and JSON (turned on by the config, flushed on stop) —
 * to a receiver that decodes both with the official OTLP definitions, and
 * hands the engine a traceparent of the same trace whose parent is the
 * attempt's span. With tracing off nothing is exported and the engine gets
 * no traceparent at all.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "bun";
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { startSim } from "../helpers/cluster.ts";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../helpers/otlp-receiver.ts";
import { type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";
import { startRogueEngine } from "../helpers/rogue-engine.ts";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${CLIENT_SPAN_ID}-01`;
const TRACESTATE = "vendor=abc";
/** OTLP's span kinds and status codes (trace.proto). */
const SERVER = 2;
const CLIENT = 3;

let engine: Server<undefined>;
let rx: OtlpReceiver;
/** What the engine received, by x-request-id. */
const received = new Map<string, { traceparent: string | null; tracestate: string | null }>();

const chunk = (content: string, finish: string | null = null) =>
  `data: {"id":"chatcmpl-trace-1","object":"chat.completion.chunk","model":"tm","choices":[{"index":0,"delta":{"content":"${content}"},"finish_reason":${finish === null ? "null" : `"${finish}"`}}]}\n\n`;
const usage = `data: {"id":"chatcmpl-trace-1","object":"chat.completion.chunk","model":"tm","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}\n\n`;

beforeAll(() => {
  rx = startOtlpReceiver();
  engine = startRogueEngine(["tm"], async (req) => {
    const body = (await req.json()) as { stream?: boolean };
    received.set(req.headers.get("x-request-id") ?? "", { traceparent: req.headers.get("traceparent"), tracestate: req.headers.get("tracestate") });
    if (body.stream) {
      // Token by token, as an engine writes them (the first token reaches the client before the answer ends).
      const events = [chunk("hi"), chunk("!", "stop"), usage, "data: [DONE]\n\n"];
      const stream = new ReadableStream<Uint8Array>({
        async pull(c) {
          const e = events.shift();
          if (e === undefined) return c.close();
          c.enqueue(new TextEncoder().encode(e));
          await Bun.sleep(5);
        },
      });
      return new Response(stream, { headers: { "content-type": "text/event-stream" } });
    }
    return Response.json({
      id: "chatcmpl-trace-2",
      object: "chat.completion",
      model: "tm",
      choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "length" }],
      usage: { prompt_tokens: 7, completion_tokens: 1, total_tokens: 8 },
    });
  });
});

afterAll(async () => {
  await stopAll();
  engine.stop(true);
  rx.server.stop(true);
});

function gatewayConfig(tracing: Record<string, unknown> | undefined): string {
  return writeGatewayConfig({
    health: { poll_interval_ms: 100 },
    models: [{ name: "tm" }],
    endpoints: [{ id: "eng", url: `http://127.0.0.1:${engine.port}`, models: ["tm"] }],
    ...(tracing ? { tracing } : {}),
  });
}

/** The OTLP variables a developer's shell may hold, blanked (an empty variable is unset to llmgw): each gateway here is traced only as its test says. */
const NO_OTEL_ENV = { OTEL_EXPORTER_OTLP_ENDPOINT: "", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "", OTEL_SDK_DISABLED: "" };

async function startTraced(tracing: Record<string, unknown> | undefined, env: Record<string, string> = {}): Promise<Started> {
  const gw = await startLlmgw(["serve", "--config", gatewayConfig(tracing)], { waitFor: 2, env: { ...NO_OTEL_ENV, ...env } });
  await waitUntil(
    async () => {
      const r = (await (await fetch(`${gw.urls.admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean }[] };
      return r.endpoints.some((e) => e.ready);
    },
    { what: "a ready endpoint", timeoutMs: 15_000 },
  );
  return gw;
}

async function chat(gw: Started, requestId: string, stream: boolean, traced = true): Promise<string> {
  const r = await fetch(`${gw.urls.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": requestId, ...(traced ? { traceparent: TRACEPARENT, tracestate: TRACESTATE } : {}) },
    body: JSON.stringify({ model: "tm", stream, max_tokens: 4, messages: [{ role: "user", content: "hello" }] }),
  });
  expect(r.status).toBe(200);
  return await r.text();
}

/** The request span of `requestId` and its children, once exported. */
async function spansOf(requestId: string): Promise<{ request: ReceivedSpan; children: ReceivedSpan[] }> {
  const request = await waitUntil(() => rx.spans().find((s) => s.attributes["llmgw.request_id"] === requestId), {
    what: `the request span of ${requestId}`,
    timeoutMs: 20_000,
  });
  const children = rx.spans().filter((s) => s.parentSpanId === request.spanId);
  return { request, children };
}

function expectTree(request: ReceivedSpan, children: ReceivedSpan[], requestId: string): ReceivedSpan {
  // The client's trace goes on: same trace id, its span the parent.
  expect(request.traceId).toBe(TRACE_ID);
  expect(request.parentSpanId).toBe(CLIENT_SPAN_ID);
  expect(request.name).toBe("chat tm");
  expect(request.kind).toBe(SERVER);
  expect(request.attributes["gen_ai.operation.name"]).toBe("chat");
  expect(request.attributes["gen_ai.request.model"]).toBe("tm");
  expect(request.attributes["gen_ai.response.model"]).toBe("tm");
  expect(request.attributes["server.address"]).toBe("127.0.0.1");
  expect(request.attributes["server.port"]).toBe(engine.port);
  const names = children.map((c) => c.name);
  expect(names).toContain("admission");
  expect(names).toContain("scheduling");
  const scheduling = children.find((c) => c.name === "scheduling")!;
  expect(scheduling.attributes["llmgw.endpoint"]).toBe("eng");
  expect(scheduling.attributes["llmgw.scheduling.candidates"]).toBe(1);
  expect(Object.keys(scheduling.attributes).some((k) => k.startsWith("llmgw.scheduling.score."))).toBe(true);
  const attempts = children.filter((c) => c.name === "attempt");
  expect(attempts.length).toBe(1);
  const attempt = attempts[0]!;
  expect(attempt.kind).toBe(CLIENT);
  expect(attempt.traceId).toBe(TRACE_ID);
  expect(attempt.attributes["server.port"]).toBe(engine.port);
  expect(attempt.attributes["gen_ai.request.model"]).toBe("tm");
  // The engine was handed the attempt's context: its own spans (vLLM's) would be the attempt's children.
  const got = received.get(requestId);
  expect(got?.traceparent).toBe(`00-${TRACE_ID}-${attempt.spanId}-01`);
  expect(got?.tracestate).toBe(TRACESTATE);
  return attempt;
}

describe("OTLP over HTTP/protobuf, turned on by OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  let gw: Started;
  beforeAll(async () => {
    gw = await startTraced(
      { export_interval_ms: 100 },
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_SERVICE_NAME: "llmgw-under-test",
      },
    );
  });

  test("a streamed chat: the request span carries the GenAI attributes, its children the admission, the decision and the attempt", async () => {
    const text = await chat(gw, "trace-proto-stream", true);
    expect(text).toContain("data: [DONE]");
    const { request, children } = await spansOf("trace-proto-stream");
    expectTree(request, children, "trace-proto-stream");
    expect(request.serviceName).toBe("llmgw-under-test");
    expect(request.attributes["gen_ai.usage.input_tokens"]).toBe(7);
    expect(request.attributes["gen_ai.usage.output_tokens"]).toBe(2);
    expect(request.attributes["gen_ai.response.finish_reasons"]).toEqual(["stop"]);
    expect(request.attributes["gen_ai.response.id"]).toBe("chatcmpl-trace-1");
    expect(request.attributes["gen_ai.response.time_to_first_chunk"]).toBeGreaterThan(0);
    expect(request.events).toContain("gen_ai.first_token");
    const protobuf = rx.requests.filter((r) => r.spans.some((s) => s.attributes["llmgw.request_id"] === "trace-proto-stream"));
    expect(protobuf.every((r) => r.contentType.startsWith("application/x-protobuf"))).toBe(true);
  });

  test("a request without a traceparent starts a trace of its own, and the engine gets it", async () => {
    await chat(gw, "trace-proto-root", false, false);
    const { request } = await spansOf("trace-proto-root");
    expect(request.traceId).not.toBe(TRACE_ID);
    expect(request.parentSpanId).toBe("");
    expect(received.get("trace-proto-root")?.traceparent).toStartWith(`00-${request.traceId}-`);
    expect(request.attributes["gen_ai.response.finish_reasons"]).toEqual(["length"]);
  });
});

describe("OTLP over HTTP/JSON, turned on by the config", () => {
  test("a JSON answer's span tree arrives as JSON with the configured headers, flushed when the gateway stops", async () => {
    // An export interval far past the test: only the flush on stop can send these spans.
    const gw = await startTraced({
      enabled: true,
      endpoint: `${rx.url}/v1/traces`,
      protocol: "http/json",
      headers: { "x-collector-key": "k-123" },
      export_interval_ms: 600_000,
    });
    await chat(gw, "trace-json", false);
    await gw.stop();
    const { request, children } = await spansOf("trace-json");
    expectTree(request, children, "trace-json");
    expect(request.attributes["gen_ai.response.id"]).toBe("chatcmpl-trace-2");
    expect(request.attributes["gen_ai.usage.output_tokens"]).toBe(1);
    const sent = rx.requests.filter((r) => r.spans.some((s) => s.attributes["llmgw.request_id"] === "trace-json"));
    expect(sent.length).toBeGreaterThan(0);
    for (const r of sent) {
      expect(r.contentType).toStartWith("application/json");
      expect(r.headers.get("x-collector-key")).toBe("k-123");
    }
  });
});

describe("tracing off (the default)", () => {
  test("nothing is exported and the engine is sent no traceparent, even when the client sent one", async () => {
    const gw = await startTraced(undefined);
    const before = rx.requests.length;
    await chat(gw, "trace-off-stream", true);
    await chat(gw, "trace-off-json", false);
    expect(received.get("trace-off-stream")).toEqual({ traceparent: null, tracestate: null });
    expect(received.get("trace-off-json")).toEqual({ traceparent: null, tracestate: null });
    // Stopping flushes whatever a tracer would hold: still nothing arrives.
    await gw.stop();
    await Bun.sleep(300);
    expect(rx.requests.length).toBe(before);
  });
});

describe("a stream cut mid-answer on one sim-engine and continued on another", () => {
  test("the continuation is a child of the request, with its own decision and attempt; the broken attempt records its failure", async () => {
    const args = ["--model", "m", "--itl-ms", "2", "--output-len", "40"];
    const [faulty, healthy] = await Promise.all([startSim(args), startSim(args)]);
    await faulty.configure({ fault_rate: 1, fault_types: ["cut:3"] });
    const config = writeGatewayConfig({
      health: { poll_interval_ms: 100 },
      // Every cut counts against the faulty replica; keep it in rotation so that streams keep landing there.
      circuit_breaker: { failure_threshold: 1000 },
      endpoints: [
        { id: "faulty", url: faulty.api, models: ["m"] },
        { id: "healthy", url: healthy.api, models: ["m"] },
      ],
      tracing: { endpoint: `${rx.url}/v1/traces`, export_interval_ms: 100 },
    });
    const gw = await startLlmgw(["serve", "--config", config], { waitFor: 2 });
    await waitUntil(
      async () => {
        const r = (await (await fetch(`${gw.urls.admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean }[] };
        return r.endpoints.filter((e) => e.ready).length === 2;
      },
      { what: "two ready sims", timeoutMs: 15_000 },
    );
    let id: string | undefined;
    for (let i = 0; i < 24 && id === undefined; i++) {
      const res = await fetch(`${gw.urls.api}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-request-id": `trace-cut-${i}` },
        body: JSON.stringify({ model: "m", stream: true, max_tokens: 20, messages: [{ role: "user", content: `Describe city ${i} at night` }] }),
      });
      expect(await res.text()).toContain("data: [DONE]");
      if (res.headers.get("x-llmgw-endpoint") === "faulty") id = `trace-cut-${i}`;
    }
    if (id === undefined) throw new Error("no stream started on the faulty replica");
    const { request, children } = await spansOf(id);
    expect(request.attributes["llmgw.outcome"]).toBe("ok");
    const broken = children.find((c) => c.name === "attempt")!;
    expect(broken.attributes["llmgw.endpoint"]).toBe("faulty");
    expect(broken.attributes["error.type"]).toBe("truncated");
    const continuation = children.find((c) => c.name === "continuation")!;
    expect(continuation.attributes["llmgw.break_cause"]).toBe("cut");
    expect(continuation.attributes["llmgw.recovery"]).toBe("recovered");
    const under = rx.spans().filter((s) => s.parentSpanId === continuation.spanId);
    expect(under.map((s) => s.name).sort()).toEqual(["attempt", "scheduling"]);
    expect(under.find((s) => s.name === "attempt")!.attributes["llmgw.endpoint"]).toBe("healthy");
    // The faulty replica was spent for this continuation: the healthy one was the only candidate.
    expect(under.find((s) => s.name === "scheduling")!.attributes["llmgw.scheduling.candidates"]).toBe(1);
    await gw.stop();
  });
});

describe("Anthropic's Messages API, streamed from a sim-engine that serves it", () => {
  test("the request span names the GenAI operation and reads Anthropic's events: message id, stop reason, usage", async () => {
    const sim = await startSim(["--model", "m", "--itl-ms", "2", "--output-len", "12"]);
    const config = writeGatewayConfig({
      health: { poll_interval_ms: 100 },
      endpoints: [{ id: "sim", url: sim.api, models: ["m"] }],
      tracing: { endpoint: `${rx.url}/v1/traces`, protocol: "http/json", export_interval_ms: 100 },
    });
    const gw = await startLlmgw(["serve", "--config", config], { waitFor: 2, env: NO_OTEL_ENV });
    await waitUntil(
      async () => {
        const r = (await (await fetch(`${gw.urls.admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean }[] };
        return r.endpoints.some((e) => e.ready);
      },
      { what: "a ready sim", timeoutMs: 15_000 },
    );
    const res = await fetch(`${gw.urls.api}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "trace-messages", traceparent: TRACEPARENT },
      body: JSON.stringify({ model: "m", max_tokens: 5, stream: true, messages: [{ role: "user", content: "Tell me about the sea" }] }),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("message_stop");
    const { request, children } = await spansOf("trace-messages");
    expect(request.traceId).toBe(TRACE_ID);
    expect(request.name).toBe("chat m");
    expect(request.attributes["gen_ai.operation.name"]).toBe("chat");
    expect(String(request.attributes["gen_ai.response.id"])).toStartWith("msg");
    expect(request.attributes["gen_ai.response.finish_reasons"]).toEqual(["max_tokens"]);
    expect(request.attributes["gen_ai.usage.output_tokens"]).toBe(5);
    expect(children.map((c) => c.name)).toContain("attempt");
    await gw.stop();
  });
});
