/**
 * Scenario: a gateway whose endpoint lists no models (they are discovered
 * from its /v1/models) runs a 400-line batch; it is SIGKILLed mid-batch and
 * started again, then stopped gracefully (SIGTERM) mid-batch and started
 * again. Each restart resumes the batch only once the endpoint's models are
 * discovered: no line is failed with 404 MODEL_NOT_FOUND, the batch ends
 * `completed` with all 400 lines answered 200, each custom_id exactly once.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { batchEnded, createBatchFrom, expectEachLineEndedOnce, linesDone, openaiClient } from "../helpers/batch-e2e.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "discovered-model";
const LINES = 400;
const KEY = "sk-restart-tenant";
let sim: Sim;
let dataDir: string;
let config: Record<string, unknown>;

beforeAll(async () => {
  // ~50 ms a line at 16 in flight: the batch takes a few seconds, so both stops land mid-way.
  sim = await startSim(["--model", MODEL, "--itl-ms", "10", "--prefill-overhead-ms", "5", "--max-num-seqs", "64"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-restart-discovered-"));
  config = {
    data_dir: dataDir,
    // No `models`: the gateway learns them from the engine's /v1/models after each start.
    endpoints: [{ id: "sim-0", url: sim.api }],
    auth: { keys: [{ key: KEY, tenant: "evals" }] },
    batch: { concurrency_per_batch: 16, concurrency_per_tenant: 16 },
  };
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test("SIGKILL and SIGTERM restarts mid-batch: resumed lines wait for discovery, none fails, each line once", async () => {
  let gw = await startGateway(config, 1);
  let client = openaiClient(gw.api, KEY);
  await waitUntil(async () => (await client.models.list()).data.some((m) => m.id === MODEL), { what: "the model discovered" });
  const created = await createBatchFrom(client, chatBatchJsonl(LINES, MODEL, 4));

  await waitUntil(async () => (await linesDone(client, created.id)) >= 80, { timeoutMs: 60_000, intervalMs: 20, what: "80 lines done" });
  await gw.stop("SIGKILL");
  // Started without waiting for its endpoint: the runner must do the waiting.
  gw = await startGateway(config, 0);
  client = openaiClient(gw.api, KEY);
  const afterKill = await linesDone(client, created.id);
  await waitUntil(async () => (await linesDone(client, created.id)) >= afterKill + 100, { timeoutMs: 60_000, intervalMs: 20, what: "100 more lines done" });
  expect((await client.batches.retrieve(created.id)).request_counts?.failed).toBe(0);

  await gw.stop("SIGTERM");
  gw = await startGateway(config, 0);
  client = openaiClient(gw.api, KEY);
  const done = await batchEnded(client, created.id);
  expect(done.status).toBe("completed");
  expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
  const { output } = await expectEachLineEndedOnce(client, done, LINES);
  expect(output.every((l) => l.response?.status_code === 200)).toBe(true);
}, 180_000);
