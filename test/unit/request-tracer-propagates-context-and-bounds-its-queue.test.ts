/** The request tracer alone: what it sends an engine for a sampled, an unsampled and a malformed client traceparent, and a collector that hangs costing dropped (and counted) spans, never memory. */
import { afterAll, describe, expect, test } from "bun:test";
import { Registry } from "prom-client";
import type { TracingConfig } from "../../src/config/types.ts";
import { openTracer } from "../../src/tracing/otel-tracer.ts";
import { startOtlpReceiver } from "../helpers/otlp-receiver.ts";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
/** A collector that takes export requests and never answers. */
const hanging = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Promise<Response>(() => {}) });
afterAll(() => hanging.stop(true));

function settings(over: Partial<TracingConfig> = {}): TracingConfig {
  return {
    endpoint: `http://127.0.0.1:${hanging.port}/v1/traces`,
    protocol: "http/protobuf",
    headers: {},
    serviceName: "llmgw-test",
    sampleRatio: 1,
    parentBased: true,
    maxQueueSpans: 2048,
    maxBatchSpans: 512,
    exportIntervalMs: 600_000,
    exportTimeoutMs: 60_000,
    ...over,
  };
}

/** The traceparent an attempt of a request with these client headers sends its engine. */
function engineTraceparent(client: Record<string, string>, over: Partial<TracingConfig> = {}): string | undefined {
  const tracer = openTracer(settings(over), new Registry());
  const trace = tracer.start(new Headers(client), "chat", "/v1/chat/completions", "r1");
  const headers: Record<string, string> = {};
  trace.attempt(headers, "http://10.0.0.7:8000", "e1", "m");
  trace.attemptEnded({ kind: "healthy" });
  trace.finish("ok", 200, undefined);
  return headers.traceparent;
}

describe("context sent to the engine", () => {
  test("a sampled client trace goes on, sampled, under a span of the gateway's", () => {
    const sent = engineTraceparent({ traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` });
    expect(sent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    expect(sent).not.toContain("00f067aa0ba902b7");
  });

  test("an unsampled client trace is still propagated, unsampled (the engine must not start its own)", () => {
    expect(engineTraceparent({ traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-00` })).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));
  });

  test("a malformed traceparent is ignored: a trace of the gateway's own, sampled by its ratio", () => {
    const sent = engineTraceparent({ traceparent: "00-not-a-trace-01" }, { sampleRatio: 0 });
    expect(sent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(sent).not.toContain(TRACE_ID);
  });
});

describe("the export queue", () => {
  const dropped = async (registry: Registry) => (await registry.getSingleMetric("llmgw_trace_spans_dropped_total")!.get()).values[0]?.value ?? 0;

  test("a collector that never answers: one batch in flight, the queue full, every further span dropped and counted", async () => {
    const registry = new Registry();
    const tracer = openTracer(settings({ maxQueueSpans: 4, maxBatchSpans: 2 }), registry);
    for (let i = 0; i < 20; i++) tracer.start(new Headers(), "chat", "/v1/chat/completions", `r${i}`).finish("ok", 200, undefined);
    const n = await dropped(registry);
    // Held at most: the queue and the one batch being exported.
    expect(20 - n).toBeLessThanOrEqual(4 + 2);
    expect(n).toBeGreaterThanOrEqual(20 - (4 + 2));
  });

  test("spans that are not sampled take no place in it", async () => {
    const registry = new Registry();
    const tracer = openTracer(settings({ maxQueueSpans: 1, maxBatchSpans: 1, sampleRatio: 0 }), registry);
    for (let i = 0; i < 20; i++) tracer.start(new Headers(), "chat", "/v1/chat/completions", `r${i}`).finish("ok", 200, undefined);
    expect(await dropped(registry)).toBe(0);
  });
});

describe("stopping", () => {
  test("shutdown sends every queued span, however many batches wait (none fails on the exporter's concurrency limit)", async () => {
    const rx = startOtlpReceiver();
    try {
      const registry = new Registry();
      const tracer = openTracer(settings({ endpoint: `${rx.url}/v1/traces`, maxQueueSpans: 100, maxBatchSpans: 2 }), registry);
      for (let i = 0; i < 30; i++) tracer.start(new Headers(), "chat", "/v1/chat/completions", `stop-${i}`).finish("ok", 200, undefined);
      await tracer.shutdown();
      expect(rx.spans().length).toBe(30);
      expect((await registry.getSingleMetric("llmgw_trace_export_failures_total")!.get()).values[0]?.value ?? 0).toBe(0);
    } finally {
      rx.server.stop(true);
    }
  });
});

describe("what the request span reads of an answer", () => {
  async function exported(feed: (trace: ReturnType<ReturnType<typeof openTracer>["start"]>) => void, route: "chat" | "messages") {
    const rx = startOtlpReceiver();
    try {
      const tracer = openTracer(settings({ endpoint: `${rx.url}/v1/traces` }), new Registry());
      const trace = tracer.start(new Headers(), route, "/v1/x", "answer");
      trace.parsed("m", true);
      feed(trace);
      trace.finish("ok", 200, undefined);
      await tracer.shutdown();
      return rx.spans().find((s) => s.attributes["llmgw.request_id"] === "answer")!;
    } finally {
      rx.server.stop(true);
    }
  }

  test("a chat stream: the first event's id and model, each choice's finish_reason", async () => {
    const span = await exported((t) => {
      t.firstEvent(new TextEncoder().encode('data: {"id":"chatcmpl-9","model":"m-snap","choices":[{"index":0,"delta":{"content":"a"}}]}'));
      t.finishEvent(
        new TextEncoder().encode(
          'data: {"id":"chatcmpl-9","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"length"}]}',
        ),
      );
    }, "chat");
    expect(span.name).toBe("chat m");
    expect(span.attributes).toMatchObject({
      "gen_ai.response.id": "chatcmpl-9",
      "gen_ai.response.model": "m-snap",
      "gen_ai.response.finish_reasons": ["stop", "length"],
    });
  });

  test("an Anthropic Messages stream: message_start's id and model, message_delta's stop_reason", async () => {
    const span = await exported((t) => {
      t.firstEvent(
        new TextEncoder().encode('event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"claude-ish","role":"assistant"}}'),
      );
      t.finishEvent(
        new TextEncoder().encode('event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}'),
      );
    }, "messages");
    expect(span.name).toBe("chat m");
    expect(span.attributes).toMatchObject({
      "gen_ai.response.id": "msg_1",
      "gen_ai.response.model": "claude-ish",
      "gen_ai.response.finish_reasons": ["end_turn"],
    });
  });
});
