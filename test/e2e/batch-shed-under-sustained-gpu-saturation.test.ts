/**
 * Scenario: a gateway in front of a sim-engine whose two simulated GPUs are
 * pinned at 100 % utilisation (POST /sim/config) — sustained saturation as
 * DCGM reports it. Batch-band requests get 429 GPU_SATURATED with
 * Retry-After while interactive ones succeed, llmgw_gpu_shed_total equals
 * the 429s exactly, and an idempotent replay and a cache hit of batch-band
 * requests still answer (no GPU); a batch job waits, saying why, and
 * completes once saturation clears; with the exporter gone stale nothing is
 * shed. Every request leaves one audit line.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-model";
const KEY_A = "sk-tenant-a-0000";
let sim: Sim;
let gw: Gateway;
let dataDir: string;

beforeAll(async () => {
  sim = await startSim(["--model", MODEL, "--gpus", "2", "--dcgm-port", "0", "--itl-ms", "2", "--prefill-overhead-ms", "1", "--max-num-seqs", "16"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-shed-"));
  gw = await startGateway(
    {
      data_dir: dataDir,
      endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL], dcgm_url: `${sim.dcgm}/metrics` }],
      health: { poll_interval_ms: 100 },
      auth: { keys: [{ key: KEY_A, tenant: "a", max_band: "interactive" }] },
      gpu_health: { poll_interval_ms: 100, sustained_samples: 3, stale_after_ms: 600, shed_util_pct: 95 },
      response_cache: { models: [MODEL] },
      batch: { retry_backoff_ms: 100 },
    },
    1,
  );
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function chat(band: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY_A}`, "x-llmgw-priority": band, ...headers },
    body: JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: "user", content: "hello" }], ...body }),
  });
}

const engineRequests = async () => Number((await sim.state()).requests_total);
const saturatedGauge = async () => counterValue(await gw.metrics(), "llmgw_pool_gpu_saturated", { pool: "default" });
const pin = (pct: number | null) => sim.configure({ gpus: [0, 1].map((index) => ({ index, utilization_pct: pct })) });

function auditLines(): Record<string, unknown>[] {
  return gw
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{") && l.includes('"msg":"audit"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

test("sustained saturation sheds the batch band only; the shed counter equals the 429s; replay and cache still answer; stale data sheds nothing", async () => {
  // Idle: batch traffic flows. One idempotent and one cacheable batch-band answer are recorded.
  const keyed = await chat("batch", {}, { "idempotency-key": "nightly-1" });
  expect(keyed.status).toBe(200);
  const keyedBody = await keyed.text();
  const deterministic = { temperature: 0, messages: [{ role: "user", content: "cache me" }] };
  const miss = await chat("batch", deterministic);
  expect(miss.headers.get("x-llmgw-cache")).toBe("miss");
  const missBody = await miss.text();
  expect(await saturatedGauge()).toBe(0);

  await pin(100);
  await waitUntil(async () => (await saturatedGauge()) === 1, { timeoutMs: 5_000, what: "pool saturated" });
  const shedBefore = counterValue(await gw.metrics(), "llmgw_gpu_shed_total", { pool: "default" });
  expect(shedBefore).toBe(0);

  const before = await engineRequests();
  const batch = await Promise.all(Array.from({ length: 12 }, () => chat("batch")));
  const interactive = await Promise.all(Array.from({ length: 8 }, () => chat("interactive")));
  for (const r of batch) {
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("1"); // poll interval × samples = 300 ms, at least 1 s
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("GPU_SATURATED");
  }
  for (const r of interactive) {
    expect(r.status).toBe(200);
    await r.text();
  }
  // Replays and cache hits are answered before the shed check and use no GPU.
  const replay = await chat("batch", {}, { "idempotency-key": "nightly-1" });
  expect(replay.status).toBe(200);
  expect(replay.headers.get("x-llmgw-replay")).toBe("true");
  expect(await replay.text()).toBe(keyedBody);
  const hit = await chat("batch", deterministic);
  expect(hit.status).toBe(200);
  expect(hit.headers.get("x-llmgw-cache")).toBe("hit");
  expect(await hit.text()).toBe(missBody);
  expect((await engineRequests()) - before).toBe(interactive.length);
  expect(counterValue(await gw.metrics(), "llmgw_gpu_shed_total", { pool: "default" })).toBe(batch.length);

  // A batch job is not failed by saturation: it waits and says why, then runs when saturation clears.
  const client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: KEY_A, maxRetries: 0 });
  const file = await client.files.create({ file: await toFile(Buffer.from(chatBatchJsonl(5, MODEL)), "b.jsonl"), purpose: "batch" });
  const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  const waiting = await waitUntil(
    async () => {
      const b = (await (await fetch(`${gw.api}/v1/batches/${created.id}`, { headers: { authorization: `Bearer ${KEY_A}` } })).json()) as {
        status: string;
        request_counts: { completed: number };
        llmgw: { waiting_reason: string | null; waiting_since: number | null };
      };
      return b.llmgw.waiting_reason === "gpu_saturated" ? b : undefined;
    },
    { timeoutMs: 5_000, what: "batch waiting for saturation" },
  );
  expect(waiting.status).toBe("in_progress");
  expect(waiting.request_counts.completed).toBe(0);
  expect(waiting.llmgw.waiting_since).toBeGreaterThan(0);
  await Bun.sleep(500);
  expect((await client.batches.retrieve(created.id)).request_counts?.completed).toBe(0);
  await pin(null);
  const done = await waitUntil(
    async () => {
      const b = await client.batches.retrieve(created.id);
      return b.status === "completed" ? b : undefined;
    },
    { timeoutMs: 15_000, what: "batch completed after saturation cleared" },
  );
  expect(done.request_counts).toEqual({ total: 5, completed: 5, failed: 0 });

  // Saturated again, then the exporter stops answering: once its data is stale (600 ms), nothing is shed.
  await pin(100);
  await waitUntil(async () => (await saturatedGauge()) === 1, { timeoutMs: 5_000, what: "pool saturated again" });
  await sim.configure({ dcgm_dead: true });
  await waitUntil(async () => (await saturatedGauge()) === 0, { timeoutMs: 3_000, what: "stale data fails open" });
  const shedAtStale = counterValue(await gw.metrics(), "llmgw_gpu_shed_total", { pool: "default" });
  const stale = await Promise.all(Array.from({ length: 5 }, () => chat("batch")));
  expect(stale.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
  expect(counterValue(await gw.metrics(), "llmgw_gpu_shed_total", { pool: "default" })).toBe(shedAtStale);

  // The audit log: one line per request, naming what answered it.
  await waitUntil(() => auditLines().filter((a) => a.batch_id === created.id && a.audit === "batch").length === 1, { what: "the batch's audit line" });
  const audits = auditLines();
  expect(audits.filter((a) => a.error_code === "GPU_SATURATED" && a.band === "batch" && a.batch_id === null).length).toBe(batch.length);
  expect(audits.some((a) => a.replay === true && a.status === 200 && a.endpoint === "sim-0")).toBe(false); // a replay reached no engine
  expect(audits.filter((a) => a.replay === true)).toEqual([
    expect.objectContaining({ outcome: "ok", attempts: 0, endpoint: null, route: "/v1/chat/completions" }),
  ]);
  expect(audits.filter((a) => a.cache === "hit")).toHaveLength(1);
  const lines = audits.filter((a) => a.audit === "request" && a.batch_id === created.id && a.outcome === "ok");
  expect(lines).toHaveLength(5);
  expect(lines.every((a) => a.tenant === "a" && a.band === "batch" && a.endpoint === "sim-0")).toBe(true);
  expect(audits.find((a) => a.audit === "batch" && a.batch_id === created.id)).toMatchObject({
    outcome: "completed",
    route: "/v1/chat/completions",
    lines: { total: 5, completed: 5, failed: 0 },
  });
}, 90_000);
