/**
 * Scenario: `llmgw serve` over a sim-engine, idempotency keys and the
 * response cache seen from a client. A retry with the same key replays the
 * first answer byte for byte (a stream as its events) without reaching the
 * engine; the key with another body is a 422; a duplicate sent while the
 * first still runs waits for it and replays it, or gets a 409 with
 * Retry-After once idempotency.wait_ms is over. The cache answers a repeated
 * deterministic request with the same bytes (hit), never across tenants, and
 * leaves other requests alone.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

const MODEL = "sim-model";
const OTHER = "sim-other";
const KEY_A = "sk-tenant-a-0000";
const KEY_B = "sk-tenant-b-0000";
// A token every 25 ms: a 6-token answer takes ~150 ms, a 60-token one ~1.5 s.
const WAIT_MS = 500;
let sim: Sim;
let gw: Gateway;
let dataDir: string;

beforeAll(async () => {
  sim = await startSim(["--model", MODEL, "--model", OTHER, "--itl-ms", "25", "--prefill-overhead-ms", "1", "--output-len", "200"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-idem-cache-"));
  gw = await startGateway(
    {
      data_dir: dataDir,
      endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL, OTHER] }],
      auth: {
        keys: [
          { key: KEY_A, tenant: "a" },
          { key: KEY_B, tenant: "b" },
        ],
      },
      idempotency: { wait_ms: WAIT_MS },
      response_cache: { models: [MODEL] },
    },
    1,
  );
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function post(body: Record<string, unknown>, opts: { key?: string; idem?: string; path?: string } = {}): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json", authorization: `Bearer ${opts.key ?? KEY_A}` };
  if (opts.idem !== undefined) headers["idempotency-key"] = opts.idem;
  return fetch(`${gw.api}${opts.path ?? "/v1/chat/completions"}`, { method: "POST", headers, body: JSON.stringify(body) });
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, max_tokens: 6, messages: [{ role: "user", content }], ...extra });
const engineRequests = async () => Number((await sim.state()).requests_total);

describe("idempotent replay through the gateway", () => {
  test("a retry replays the answer byte for byte, non-streaming and streaming, without reaching the engine", async () => {
    const before = await engineRequests();
    const first = await post(chat("once", { temperature: 0.7 }), { idem: "order-1" });
    const firstBody = await first.text();
    const retry = await post(chat("once", { temperature: 0.7 }), { idem: "order-1" });
    expect(retry.status).toBe(200);
    expect(retry.headers.get("x-llmgw-replay")).toBe("true");
    expect(first.headers.get("x-llmgw-replay")).toBeNull();
    expect(await retry.text()).toBe(firstBody);
    expect(retry.headers.get("x-request-id")).toBe(first.headers.get("x-request-id"));

    const stream = { ...chat("stream once"), stream: true };
    const s1 = await post(stream, { idem: "order-2" });
    const events = await s1.text();
    expect(events.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const s2 = await post(stream, { idem: "order-2" });
    expect(s2.headers.get("content-type")).toContain("text/event-stream");
    expect(await s2.text()).toBe(events);
    expect((await engineRequests()) - before).toBe(2);
    expect(counterValue(await gw.metrics(), "llmgw_idempotent_replays_total")).toBeGreaterThanOrEqual(2);

    // Keys are per tenant: tenant b's "order-1" is its own request.
    const b = await post(chat("once", { temperature: 0.7 }), { key: KEY_B, idem: "order-1" });
    expect(b.headers.get("x-llmgw-replay")).toBeNull();
    await b.text();
    expect((await engineRequests()) - before).toBe(3);
  });

  test("the same key with another body (or route) is a 422 and runs nothing", async () => {
    await (await post(chat("first body"), { idem: "reuse-1" })).text();
    const before = await engineRequests();
    const other = await post(chat("another body"), { idem: "reuse-1" });
    expect(other.status).toBe(422);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe("IDEMPOTENCY_KEY_REUSED");
    const route = await post({ model: MODEL, prompt: "first body", max_tokens: 6 }, { idem: "reuse-1", path: "/v1/completions" });
    expect(route.status).toBe(422);
    await route.text();
    expect(await engineRequests()).toBe(before);
  });

  test("a duplicate while the first runs waits and replays it; past idempotency.wait_ms it gets a 409 with Retry-After", async () => {
    const before = await engineRequests();
    const short = chat("short", { max_tokens: 6 });
    const first = post(short, { idem: "dup-1" });
    await Bun.sleep(40);
    const dup = await post(short, { idem: "dup-1" });
    const firstBody = await (await first).text();
    expect(dup.status).toBe(200);
    expect(dup.headers.get("x-llmgw-replay")).toBe("true");
    expect(await dup.text()).toBe(firstBody);
    expect((await engineRequests()) - before).toBe(1);

    const long = chat("long", { max_tokens: 60 });
    const slow = post(long, { idem: "dup-2" });
    await Bun.sleep(40);
    const startedAt = performance.now();
    const conflict = await post(long, { idem: "dup-2" });
    expect(conflict.status).toBe(409);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(WAIT_MS - 50);
    expect(conflict.headers.get("retry-after")).toBe("1");
    expect(((await conflict.json()) as { error: { code: string } }).error.code).toBe("IDEMPOTENCY_KEY_IN_USE");
    const slowBody = await (await slow).text();
    const later = await post(long, { idem: "dup-2" });
    expect(later.headers.get("x-llmgw-replay")).toBe("true");
    expect(await later.text()).toBe(slowBody);
    expect((await engineRequests()) - before).toBe(2);
  });

  test("a failed first attempt keeps nothing: the retry with the same key runs again", async () => {
    await sim.configure({ fault_rate: 1, fault_types: ["500"] });
    const failed = await post(chat("flaky"), { idem: "fails-1" });
    await sim.configure({ fault_rate: 0 });
    expect(failed.status).toBe(502);
    await failed.text();
    const before = await engineRequests();
    const retry = await post(chat("flaky"), { idem: "fails-1" });
    expect(retry.status).toBe(200);
    expect(retry.headers.get("x-llmgw-replay")).toBeNull();
    await retry.text();
    expect((await engineRequests()) - before).toBe(1);
  });
});

describe("response cache through the gateway", () => {
  test("miss then hit with the same bytes; per tenant; streams too; non-deterministic and not-opted-in requests pass untouched", async () => {
    const before = await engineRequests();
    const deterministic = chat("what is 2+2", { temperature: 0 });
    const miss = await post(deterministic);
    expect(miss.headers.get("x-llmgw-cache")).toBe("miss");
    const missBody = await miss.text();
    const hit = await post({ ...deterministic, user: "someone-else" }); // caller-only fields do not change the key
    expect(hit.headers.get("x-llmgw-cache")).toBe("hit");
    expect(await hit.text()).toBe(missBody);
    expect(hit.headers.get("x-request-id")).not.toBe(miss.headers.get("x-request-id"));
    expect((await engineRequests()) - before).toBe(1);

    // Tenant b never sees tenant a's entry.
    const bMiss = await post(deterministic, { key: KEY_B });
    expect(bMiss.headers.get("x-llmgw-cache")).toBe("miss");
    await bMiss.text();
    const bHit = await post(deterministic, { key: KEY_B });
    expect(bHit.headers.get("x-llmgw-cache")).toBe("hit");
    await bHit.text();
    expect((await engineRequests()) - before).toBe(2);

    const stream = { ...chat("stream 2+2", { seed: 7 }), stream: true };
    const sMiss = await post(stream);
    const events = await sMiss.text();
    const sHit = await post(stream);
    expect(sHit.headers.get("x-llmgw-cache")).toBe("hit");
    expect(await sHit.text()).toBe(events);
    expect((await engineRequests()) - before).toBe(3);

    for (const body of [chat("random", { temperature: 0.9 }), { ...chat("other model", { temperature: 0 }), model: OTHER }]) {
      const a = await post(body);
      const b = await post(body);
      expect([a.headers.get("x-llmgw-cache"), b.headers.get("x-llmgw-cache")]).toEqual([null, null]);
      await Promise.all([a.text(), b.text()]);
    }
    expect((await engineRequests()) - before).toBe(7);
    const metrics = await gw.metrics();
    expect(counterValue(metrics, "llmgw_response_cache_lookups_total", { result: "hit" })).toBe(3);
    expect(counterValue(metrics, "llmgw_response_cache_lookups_total", { result: "miss" })).toBe(3);
    expect(counterValue(metrics, "llmgw_response_cache_bytes")).toBeGreaterThan(0);
  });
});
