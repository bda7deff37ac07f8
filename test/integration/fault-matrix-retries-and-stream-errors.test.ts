/**
 * The sim-engine's faults against llmgw, one by one: for each, what the
 * client sees and which retry or fallback the gateway took. Endpoint "a" is
 * faulted, "b" is healthy, "c" serves the fallback model with a longer
 * context. Before the first byte a failure moves to another endpoint (or
 * model); after it the client gets an explicit SSE error event and [DONE].
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { counterValue, type Gateway, readSse, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

let a: Sim;
let b: Sim;
let c: Sim;
let gw: Gateway;

const NO_FAULTS = { fault_rate: 0, fault_types: [] };

beforeAll(async () => {
  [a, b, c] = await Promise.all([
    startSim(["--model", "m", "--itl-ms", "5", "--max-model-len", "64"]),
    startSim(["--model", "m", "--itl-ms", "5", "--max-model-len", "64"]),
    startSim(["--model", "m-big", "--itl-ms", "5", "--max-model-len", "8192"]),
  ]);
  gw = await startGateway(
    {
      deadlines: { dial_ms: 500, headers_ms: 700, first_token_ms: 700, idle_ms: 700, total_ms: 30_000 },
      retry: { max_attempts: 3, min_per_s: 1000, backoff_ms: 0 },
      // Keep the breaker out of the matrix; it has its own test below.
      circuit_breaker: { failure_threshold: 1000, open_ms: 1000 },
      // Breaks after the first byte end with their explicit error here; continuing them is tested in broken-streams-continue-on-another-replica.
      continuation: { enabled: false },
      health: { poll_interval_ms: 100 },
      models: [{ name: "m", fallback: ["m-big"] }, { name: "m-big" }],
      endpoints: [
        { id: "a", url: a.api, models: ["m"] },
        { id: "b", url: b.api, models: ["m"] },
        { id: "c", url: c.api, models: ["m-big"] },
      ],
    },
    3,
  );
});

afterEach(async () => {
  await Promise.all([a, b, c].map((s) => s.configure(NO_FAULTS)));
});

afterAll(stopAll);

interface ChatResult {
  status: number;
  endpoint: string | null;
  attempts: number;
  payloads: string[];
  body: string;
}

async function chat(model = "m", opts: { content?: string; maxTokens?: number; stream?: boolean } = {}): Promise<ChatResult> {
  const res = await fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, stream: opts.stream ?? true, max_tokens: opts.maxTokens ?? 6, messages: [{ role: "user", content: opts.content ?? "hi" }] }),
  });
  const endpoint = res.headers.get("x-llmgw-endpoint");
  const attempts = Number(res.headers.get("x-llmgw-attempts") ?? 0);
  if (res.headers.get("content-type")?.startsWith("text/event-stream")) {
    return { status: res.status, endpoint, attempts, payloads: await readSse(res), body: "" };
  }
  return { status: res.status, endpoint, attempts, payloads: [], body: await res.text() };
}

/** Send until `pred` holds (the scheduler picks at random between equals); at most 24 tries. */
async function chatUntil(pred: (r: ChatResult) => boolean, model = "m"): Promise<ChatResult> {
  let r: ChatResult | undefined;
  for (let i = 0; i < 24; i++) {
    r = await chat(model);
    if (pred(r)) return r;
  }
  throw new Error(`condition never held; last: ${JSON.stringify(r)}`);
}

function tokenEvents(payloads: string[]): number {
  // Content deltas only: the first chunk carries the role (with empty content).
  return payloads.filter((p) => p.includes('"delta":{"content"')).length;
}

describe("before the first byte: retried on another endpoint", () => {
  for (const [fault, reason] of [
    ["500", "status_5xx"],
    ["503", "status_5xx"],
    ["no-headers", "headers_timeout"],
    ["no-first-token", "first_token_timeout"],
  ] as const) {
    test(`engine fault ${fault} → retry (${reason}) → complete stream from b`, async () => {
      const before = counterValue(await gw.metrics(), "llmgw_retries_total", { reason });
      await a.configure({ fault_rate: 1, fault_types: [fault] });
      const r = await chatUntil((x) => x.attempts >= 2);
      expect(r.status).toBe(200);
      expect(r.endpoint).toBe("b");
      expect(r.payloads.at(-1)).toBe("[DONE]");
      expect(r.payloads.some((p) => p.includes('"error"'))).toBe(false);
      expect(tokenEvents(r.payloads)).toBeGreaterThan(0);
      expect(counterValue(await gw.metrics(), "llmgw_retries_total", { reason })).toBeGreaterThan(before);
    });
  }

  test("engine 429 → the model cools down on that endpoint for its Retry-After and the request completes on b", async () => {
    await a.configure({ fault_rate: 1, fault_types: ["429"] });
    const r = await chatUntil((x) => x.attempts >= 2);
    expect(r.status).toBe(200);
    expect(r.endpoint).toBe("b");
    const ep = (await gw.endpoints()).find((e) => e.id === "a")! as unknown as { circuit: string; model_circuits: Record<string, string> };
    // The 429 counts against model m on a, not against a as a whole.
    expect(ep.model_circuits.m).toBe("open");
    expect(ep.circuit).toBe("closed");
    // While cooling down, nothing goes to a.
    for (let i = 0; i < 5; i++) expect((await chat()).endpoint).toBe("b");
    // The Retry-After (1 s) passes: a is back in rotation for m.
    await waitUntil(
      async () => ((await gw.endpoints()).find((e) => e.id === "a") as unknown as { model_circuits: Record<string, string> }).model_circuits.m === undefined,
      { what: "a's cool-down to end" },
    );
  });
});

describe("fallback chain and engine rejections", () => {
  test("every endpoint of the model fails → the fallback model serves it", async () => {
    const before = counterValue(await gw.metrics(), "llmgw_fallbacks_total", { from_model: "m", to_model: "m-big" });
    await a.configure({ fault_rate: 1, fault_types: ["500"] });
    await b.configure({ fault_rate: 1, fault_types: ["500"] });
    const r = await chat();
    expect(r.status).toBe(200);
    expect(r.endpoint).toBe("c");
    // a and b each failed once (or a was still cooling down from the 429 test and was skipped).
    expect(r.attempts).toBeGreaterThanOrEqual(2);
    expect(counterValue(await gw.metrics(), "llmgw_fallbacks_total", { from_model: "m", to_model: "m-big" })).toBe(before + 1);
  });

  test("everything fails → one OpenAI-shaped 502 naming the last failure", async () => {
    await Promise.all([a, b, c].map((s) => s.configure({ fault_rate: 1, fault_types: ["500"] })));
    const r = await chat("m", { stream: false });
    expect(r.status).toBe(502);
    const body = JSON.parse(r.body) as { error: { code: string; type: string; message: string } };
    expect(body.error.code).toBe("UPSTREAM_ERROR");
    expect(body.error.type).toBe("server_error");
    expect(body.error.message).toContain("engine answered 500");
    expect(r.attempts).toBeGreaterThanOrEqual(2);
  });

  test("a prompt too long for the model goes to the longer-context fallback", async () => {
    const r = await chat("m", { content: "x".repeat(2000) });
    expect(r.status).toBe(200);
    expect(r.endpoint).toBe("c");
  });

  test("an engine 400 with nowhere better to go reaches the client once, unretried", async () => {
    const before = counterValue(await gw.metrics(), "llmgw_retries_total");
    const r = await chat("m-big", { content: "x".repeat(200_000), stream: false });
    expect(r.status).toBe(400);
    const body = JSON.parse(r.body) as { error: { code: string; type: string } };
    expect(body.error.code).toBe("CONTEXT_LENGTH_EXCEEDED");
    expect(body.error.type).toBe("invalid_request_error");
    expect(r.attempts).toBe(1);
    expect(counterValue(await gw.metrics(), "llmgw_retries_total")).toBe(before);
  });
});

describe("after the first byte: no retry, an explicit SSE error", () => {
  test("stall mid-stream → tokens, then UPSTREAM_IDLE_TIMEOUT and [DONE]", async () => {
    await a.configure({ fault_rate: 1, fault_types: ["stall:2"] });
    const r = await chatUntil((x) => x.endpoint === "a");
    expect(r.status).toBe(200);
    expect(r.attempts).toBe(1);
    expect(tokenEvents(r.payloads)).toBe(2);
    expect(JSON.parse(r.payloads.at(-2)!).error.code).toBe("UPSTREAM_IDLE_TIMEOUT");
    expect(r.payloads.at(-1)).toBe("[DONE]");
  });

  test("connection cut mid-stream → tokens, then UPSTREAM_STREAM_TRUNCATED and [DONE]", async () => {
    await a.configure({ fault_rate: 1, fault_types: ["cut:2"] });
    const r = await chatUntil((x) => x.endpoint === "a");
    expect(r.status).toBe(200);
    expect(tokenEvents(r.payloads)).toBe(2);
    expect(JSON.parse(r.payloads.at(-2)!).error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
    expect(r.payloads.at(-1)).toBe("[DONE]");
  });

  test("slow tokens within the idle deadline → a complete, clean stream", async () => {
    await a.configure({ fault_rate: 1, fault_types: ["slow:150"] });
    const r = await chatUntil((x) => x.endpoint === "a");
    expect(r.status).toBe(200);
    expect(tokenEvents(r.payloads)).toBe(6);
    expect(r.payloads.some((p) => p.includes('"error"'))).toBe(false);
    expect(r.payloads.at(-1)).toBe("[DONE]");
  });
});

describe("circuit breaker", () => {
  test("a model that keeps failing on an endpoint leaves rotation there, is probed, and returns once it answers", async () => {
    const gw2 = await startGateway(
      {
        deadlines: { headers_ms: 700, first_token_ms: 700, idle_ms: 700 },
        retry: { max_attempts: 2, min_per_s: 1000, backoff_ms: 0 },
        circuit_breaker: { failure_threshold: 2, open_ms: 300 },
        endpoints: [
          { id: "a", url: a.api, models: ["m"] },
          { id: "b", url: b.api, models: ["m"] },
        ],
      },
      2,
    );
    try {
      await a.configure({ fault_rate: 1, fault_types: ["500"] });
      // A 5xx counts against the model it happened to (m on a), not against a itself.
      const state = async () =>
        (
          (await (await fetch(`${gw2.admin}/admin/v1/endpoints`)).json()) as {
            endpoints: { id: string; circuit: string; model_circuits: Record<string, string> }[];
          }
        ).endpoints[0]!;
      const send = () =>
        fetch(`${gw2.api}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "x" }] }),
        });
      for (let i = 0; i < 30 && (await state()).model_circuits.m !== "open"; i++) expect((await send()).status).toBe(200);
      expect((await state()).model_circuits.m).toBe("open");
      expect((await state()).circuit).toBe("closed");
      // Healed: after the open period one probe goes through and closes it.
      await a.configure(NO_FAULTS);
      await Bun.sleep(400);
      for (let i = 0; i < 30 && (await state()).model_circuits.m !== undefined; i++) expect((await send()).status).toBe(200);
      expect((await state()).model_circuits.m).toBeUndefined();
    } finally {
      await gw2.stop();
    }
  });

  test("a refused connection (engine died between health polls) is retried on another endpoint", async () => {
    const doomed = await startSim(["--model", "m", "--itl-ms", "5"]);
    // Poll once at start only, so the gateway still believes the dead engine is ready.
    const gw3 = await startGateway(
      {
        health: { poll_interval_ms: 60_000 },
        retry: { max_attempts: 3, min_per_s: 1000, backoff_ms: 0 },
        endpoints: [
          { id: "doomed", url: doomed.api, models: ["m"] },
          { id: "b", url: b.api, models: ["m"] },
        ],
      },
      2,
    );
    try {
      await doomed.stop("SIGKILL");
      await Bun.sleep(1_100); // past the dial guard's "answered recently" window
      let retried = false;
      for (let i = 0; i < 16 && !retried; i++) {
        const res = await fetch(`${gw3.api}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "x" }] }),
        });
        expect(res.status).toBe(200);
        expect(res.headers.get("x-llmgw-endpoint")).toBe("b");
        await res.text();
        retried = res.headers.get("x-llmgw-attempts") === "2";
      }
      expect(retried).toBe(true);
      expect(counterValue(await gw3.metrics(), "llmgw_retries_total", { reason: "connect" })).toBeGreaterThan(0);
    } finally {
      await gw3.stop();
    }
  });
});

describe("model lists that changed since the last poll", () => {
  test("an endpoint answering 404 for the model is skipped for another that serves it", async () => {
    // "other" served m when the gateway polled it, then was replaced (same port) by an
    // engine serving another model, which answers 404 for m until the next poll.
    const before = await startSim(["--model", "m", "--itl-ms", "5"]);
    const port = new URL(before.api).port;
    const gw4 = await startGateway(
      {
        health: { poll_interval_ms: 60_000 },
        scheduling: { scorers: [{ name: "inflight", weight: 1 }] },
        endpoints: [
          { id: "other", url: before.api, models: ["m"] },
          { id: "b", url: b.api, models: ["m"] },
        ],
      },
      2,
    );
    await before.stop();
    const other = await startSim(["--model", "not-m", "--itl-ms", "5", "--port", port]);
    try {
      let retried = false;
      for (let i = 0; i < 16 && !retried; i++) {
        const res = await fetch(`${gw4.api}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "x" }] }),
        });
        expect(res.status).toBe(200);
        expect(res.headers.get("x-llmgw-endpoint")).toBe("b");
        await res.text();
        retried = res.headers.get("x-llmgw-attempts") === "2";
      }
      expect(retried).toBe(true);
      // It was the engine's 404 (not a refused connection) that moved the request.
      expect(counterValue(await gw4.metrics(), "llmgw_upstream_failures_total", { endpoint: "other", reason: "status_4xx" })).toBeGreaterThan(0);
    } finally {
      await gw4.stop();
      await other.stop();
    }
  });
});
