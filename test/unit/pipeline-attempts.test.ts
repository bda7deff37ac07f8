import { describe, expect, test } from "bun:test";
import { API_KEY, chatBody, type FakeEngine, inProcessGateway, okChat } from "../helpers/in-process-gateway.ts";

const post = (gw: ReturnType<typeof inProcessGateway>, body = chatBody()) =>
  gw.request("/v1/chat/completions", { method: "POST", headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" }, body });

function engineError(status: number, message = "engine says no"): Response {
  return Response.json({ error: { message, type: "error", param: null, code: status } }, { status });
}

/** Endpoints in `failing` answer `status`; the others answer. */
function failingOn(failing: string[], status: number): FakeEngine {
  return (endpoint, _path, body) => (failing.includes(endpoint) ? engineError(status) : okChat(String(body.model)));
}

/** A streamed answer of two tokens. */
function sseChat(model: string): Response {
  const chunk = (content: string, finish: string | null) =>
    `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", model, choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;
  return new Response(`${chunk("hi", null)}${chunk("!", "stop")}data: [DONE]\n\n`, { headers: { "content-type": "text/event-stream" } });
}

describe("the attempt loop, in process", () => {
  test("a grant's prefill load comes off at its stream's first token, once; a failed attempt's when it lets go", async () => {
    const gw = inProcessGateway({ engine: (endpoint, _path, body) => (endpoint === "e1" ? engineError(503) : sseChat(String(body.model))) });
    const res = await post(gw, chatBody("m", { stream: true }));
    expect(res.status).toBe(200);
    await res.text();
    expect(gw.trace.prefill).toEqual(["release 100", "first token 100", "release 0"]);
  });

  test("a retryable failure (503) moves the request to the model's next endpoint", async () => {
    const gw = inProcessGateway({ engine: failingOn(["e1"], 503) });
    const res = await post(gw);
    expect({ status: res.status, attempts: res.headers.get("x-llmgw-attempts"), endpoint: res.headers.get("x-llmgw-endpoint") }).toEqual({
      status: 200,
      attempts: "2",
      endpoint: "e2",
    });
    expect(gw.trace.calls.map((c) => c.endpoint)).toEqual(["e1", "e2"]);
  });

  test("a non-retryable failure (the engine rejects the request, 400) is answered as it is: no retry, no fallback", async () => {
    const gw = inProcessGateway({
      config: { models: [{ name: "m", fallback: ["m2"] }, { name: "m2" }] },
      endpoints: { m: ["e1", "e2"], m2: ["e3"] },
      engine: failingOn(["e1", "e2", "e3"], 400),
    });
    const res = await post(gw);
    expect(res.status).toBe(400);
    expect(gw.trace.calls.map((c) => c.endpoint)).toEqual(["e1"]);
  });

  test("an engine refusing the gateway's own credentials (401, 403) sends the request on; none left is 502 UPSTREAM_UNAUTHORIZED, never the client's 401", async () => {
    const moved = inProcessGateway({ engine: failingOn(["e1"], 401) });
    const ok = await post(moved);
    expect({ status: ok.status, endpoint: ok.headers.get("x-llmgw-endpoint") }).toEqual({ status: 200, endpoint: "e2" });
    for (const status of [401, 403]) {
      const gw = inProcessGateway({ engine: failingOn(["e1", "e2"], status) });
      const res = await post(gw);
      expect(res.status).toBe(502);
      const error = ((await res.json()) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("UPSTREAM_UNAUTHORIZED");
      expect(error.message).toMatch(/endpoint 'e[12]' refused the gateway's credentials \(HTTP 40[13]\)/);
    }
  });

  test("when every endpoint of the model failed, the request falls back to the next model in its chain", async () => {
    const gw = inProcessGateway({
      config: { models: [{ name: "m", fallback: ["m2"] }, { name: "m2" }], retry: { backoff_ms: 1, same_endpoint: { status_5xx: "never" } } },
      endpoints: { m: ["e1", "e2"], m2: ["e3"] },
      engine: failingOn(["e1", "e2"], 503),
    });
    const res = await post(gw);
    expect(res.status).toBe(200);
    expect(gw.trace.calls).toEqual([
      { endpoint: "e1", model: "m" },
      { endpoint: "e2", model: "m" },
      { endpoint: "e3", model: "m2" },
    ]);
    // The answer names the model that answered, as OpenAI's does.
    expect(((await res.json()) as { model: string }).model).toBe("m2");
  });

  test("retries stop when the retry budget is spent: one retry per request deposited, none from the floor", async () => {
    const engine = failingOn(["e1", "e2", "e3"], 503);
    const endpoints = { m: ["e1", "e2", "e3"] };
    const retry = { backoff_ms: 1, max_attempts: 3, same_endpoint: { status_5xx: "never" } };
    // Budget for every retry: all three endpoints are tried.
    const ample = inProcessGateway({ engine, endpoints, config: { retry: { ...retry, budget_ratio: 10, min_per_s: 0 } } });
    expect((await post(ample)).status).toBeGreaterThanOrEqual(500);
    expect(ample.trace.calls.length).toBe(3);
    // One retry deposited per request: the third attempt is refused by the budget.
    const one = inProcessGateway({ engine, endpoints, config: { retry: { ...retry, budget_ratio: 1, min_per_s: 0 } } });
    expect((await post(one)).status).toBeGreaterThanOrEqual(500);
    expect(one.trace.calls.length).toBe(2);
    // No budget at all: the first failure is the answer.
    const none = inProcessGateway({ engine, endpoints, config: { retry: { ...retry, budget_ratio: 0, min_per_s: 0 } } });
    const res = await post(none);
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(none.trace.calls.length).toBe(1);
    expect(await none.counter("llmgw_retries_total", { model: "m" })).toBe(0);
    expect(await ample.counter("llmgw_retries_total", { model: "m" })).toBe(2);
  });

  test("the attempt limit bounds retries even with budget to spare (retry.max_attempts per model)", async () => {
    const gw = inProcessGateway({
      engine: failingOn(["e1", "e2", "e3", "e4"], 503),
      endpoints: { m: ["e1", "e2", "e3", "e4"] },
      config: { retry: { backoff_ms: 1, max_attempts: 2, budget_ratio: 10, same_endpoint: { status_5xx: "never" } } },
    });
    expect((await post(gw)).status).toBeGreaterThanOrEqual(500);
    expect(gw.trace.calls.map((c) => c.endpoint)).toEqual(["e1", "e2"]);
  });
});
