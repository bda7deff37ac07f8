import { describe, expect, test } from "bun:test";
import { API_KEY, BATCH_KEY, chatBody, type InProcessGateway, inProcessGateway } from "../helpers/in-process-gateway.ts";

function post(gw: InProcessGateway, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return gw.request("/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json", ...headers },
    body,
  });
}

async function refusal(res: Response): Promise<{ status: number; code: unknown }> {
  const body = (await res.json()) as { error?: { code?: unknown } };
  return { status: res.status, code: body.error?.code };
}

describe("the pipeline's gates, in process", () => {
  test("run in order: auth, body, quota, replay, cache, shed, then admission and the engine", async () => {
    const gw = inProcessGateway({ config: { response_cache: { models: ["m"] } } });
    const res = await post(gw, chatBody("m", { temperature: 0 }), { authorization: `Bearer ${BATCH_KEY}`, "idempotency-key": "k-1" });
    expect(res.status).toBe(200);
    expect(gw.trace.steps).toEqual(["auth", "body", "quota", "replay", "cache", "shed", "admission", "engine"]);
  });

  test("auth refuses first: a wrong key with a broken body is a 401, and nothing after the gate runs", async () => {
    const gw = inProcessGateway();
    const res = await post(gw, "{not json", { authorization: "Bearer sk-wrong-000000000" });
    expect(await refusal(res)).toEqual({ status: 401, code: "INVALID_API_KEY" });
    expect(gw.trace.steps).toEqual(["auth"]);
  });

  test("the body step refuses invalid JSON (400), an unknown model (404) and a body over max_body_bytes (413) before the quota is charged", async () => {
    const gw = inProcessGateway({ config: { max_body_bytes: 1024 } });
    expect(await refusal(await post(gw, "{not json"))).toEqual({ status: 400, code: "INVALID_JSON" });
    expect(await refusal(await post(gw, chatBody("nope")))).toEqual({ status: 404, code: "MODEL_NOT_FOUND" });
    expect(await refusal(await post(gw, chatBody("m", { pad: "x".repeat(2048) })))).toEqual({ status: 413, code: "BODY_TOO_LARGE" });
    expect(gw.trace.steps).not.toContain("quota");
    expect(gw.trace.calls).toEqual([]);
  });

  test("the quota refuses a tenant over its rate with 429 RATE_LIMITED and Retry-After, before replay and the engine", async () => {
    const gw = inProcessGateway({ config: { tenants: [{ name: "acme", requests_per_minute: 1 }] } });
    expect((await post(gw, chatBody())).status).toBe(200);
    gw.trace.steps.length = 0;
    const res = await post(gw, chatBody(), { "idempotency-key": "k-2" });
    expect(res.headers.get("retry-after")).not.toBeNull();
    expect(await refusal(res)).toEqual({ status: 429, code: "RATE_LIMITED" });
    expect(gw.trace.steps).toEqual(["auth", "body", "quota"]);
  });

  test("replay answers a recorded request with its bytes, before the cache and any engine", async () => {
    const gw = inProcessGateway({ idempotency: () => ({ kind: "replay", response: new Response("recorded", { status: 200 }) }) });
    const res = await post(gw, chatBody(), { "idempotency-key": "k-3" });
    expect({ status: res.status, text: await res.text() }).toEqual({ status: 200, text: "recorded" });
    expect(gw.trace.steps).toEqual(["auth", "body", "quota", "replay"]);
  });

  test("the cache answers a deterministic repeat from its record (x-llmgw-cache: hit), before the shed check and admission", async () => {
    const gw = inProcessGateway({ config: { response_cache: { models: ["m"] } } });
    const body = chatBody("m", { temperature: 0 });
    const miss = await post(gw, body);
    expect(miss.headers.get("x-llmgw-cache")).toBe("miss");
    await miss.text(); // recorded as it is read out
    gw.trace.steps.length = 0;
    const hit = await post(gw, body);
    expect({ status: hit.status, cache: hit.headers.get("x-llmgw-cache") }).toEqual({ status: 200, cache: "hit" });
    expect(gw.trace.steps).toEqual(["auth", "body", "quota", "cache"]);
    expect(gw.trace.calls.length).toBe(1);
  });

  test("the shed gate refuses the batch band on a saturated pool with 429 GPU_SATURATED, before admission; other bands pass", async () => {
    const gw = inProcessGateway({ saturated: true });
    const shed = await post(gw, chatBody(), { authorization: `Bearer ${BATCH_KEY}` });
    expect(shed.headers.get("retry-after")).not.toBeNull();
    expect(await refusal(shed)).toEqual({ status: 429, code: "GPU_SATURATED" });
    expect(gw.trace.steps).toEqual(["auth", "body", "quota", "shed"]);
    expect((await post(gw, chatBody())).status).toBe(200);
  });

  test("admission with nothing ready for the model answers 503 NO_READY_ENDPOINT with Retry-After, and no engine is asked", async () => {
    const gw = inProcessGateway({ endpoints: { m: [] } });
    const res = await post(gw, chatBody());
    expect(res.headers.get("retry-after")).toBe("1");
    expect(await refusal(res)).toEqual({ status: 503, code: "NO_READY_ENDPOINT" });
    expect(gw.trace.calls).toEqual([]);
  });

  test("a declared LoRA adapter no replica lists: the adapter-load gate asks the fleet after the shed check, waits, and the request is served once it is listed", async () => {
    const gw = inProcessGateway({
      endpoints: { m: ["e1", "e2"], "m-sql": ["e1"] },
      fleet: {
        declared: [{ name: "m-sql", base: "m" }],
        waitMs: 5_000,
        // The fleet loads it on e1 a moment later, as an agent would.
        onRequested: (adapter, catalog) => void setTimeout(() => catalog.setEndpoint(0, [{ name: adapter, parent: "m" }]), 20),
      },
    });
    // The batch band's key: the shed check runs (and passes) before the adapter-load gate.
    const res = await post(gw, chatBody("m-sql"), { authorization: `Bearer ${BATCH_KEY}` });
    expect(res.status).toBe(200);
    expect(gw.trace.steps).toEqual(["auth", "body", "quota", "shed", "adapter-load", "admission", "engine"]);
    expect(gw.trace.calls).toEqual([{ endpoint: "e1", model: "m-sql" }]);
    // Listed now: the next request for it passes the gate without asking.
    expect((await post(gw, chatBody("m-sql"))).status).toBe(200);
    expect(gw.trace.steps.filter((s) => s === "adapter-load")).toHaveLength(1);
  });

  test("an adapter the fleet does not load within its wait is a 503 NO_READY_ENDPOINT with Retry-After, and no engine is asked", async () => {
    const gw = inProcessGateway({
      endpoints: { m: ["e1"], "m-sql": ["e1"] },
      fleet: { declared: [{ name: "m-sql", base: "m" }], waitMs: 30, onRequested: () => {} },
    });
    const res = await post(gw, chatBody("m-sql"));
    expect(res.headers.get("retry-after")).toBe("1");
    expect(await refusal(res)).toEqual({ status: 503, code: "NO_READY_ENDPOINT" });
    expect(gw.trace.steps).not.toContain("admission");
    expect(gw.trace.calls).toEqual([]);
  });
});
