/**
 * Scenario: the only engine behind the gateway is killed mid-batch and comes
 * back on the same port 5 s later. Lines that found no ready endpoint (or a
 * connection refused) wait and run again — they are not failed — so the
 * batch ends `completed` with every line answered 200, each custom_id once;
 * the waits are counted in llmgw_batch_line_waits_total.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { batchEnded, createBatchFrom, expectEachLineEndedOnce, linesDone, openaiClient } from "../helpers/batch-e2e.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-model";
const LINES = 300;
const KEY = "sk-outage-tenant";
const SIM_ARGS = ["--model", MODEL, "--itl-ms", "10", "--prefill-overhead-ms", "5", "--max-num-seqs", "64"];
let sim: Sim;
let gw: Gateway;
let dataDir: string;

beforeAll(async () => {
  sim = await startSim(SIM_ARGS);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-engine-down-"));
  gw = await startGateway(
    {
      data_dir: dataDir,
      health: { poll_interval_ms: 100 },
      endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL] }],
      auth: { keys: [{ key: KEY, tenant: "evals" }] },
      batch: { concurrency_per_batch: 16, concurrency_per_tenant: 16, retry_backoff_ms: 200 },
    },
    1,
  );
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test("the only engine down for 5 s mid-batch: lines wait, none fails, each line once", async () => {
  const client = openaiClient(gw.api, KEY);
  // 20 tokens at 10 ms: ~200 ms a line, 16 at a time — the batch outlasts the kill.
  const created = await createBatchFrom(client, chatBatchJsonl(LINES, MODEL, 20));
  await waitUntil(async () => (await linesDone(client, created.id)) >= 50, { timeoutMs: 60_000, intervalMs: 20, what: "50 lines done" });
  const port = new URL(sim.api).port;
  await sim.stop("SIGKILL");
  await Bun.sleep(5_000);
  const during = await client.batches.retrieve(created.id);
  expect(during.status).toBe("in_progress");
  expect(during.request_counts?.failed).toBe(0);
  sim = await startSim([...SIM_ARGS, "--port", port]);

  const done = await batchEnded(client, created.id);
  expect(done.status).toBe("completed");
  expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
  const { output } = await expectEachLineEndedOnce(client, done, LINES);
  expect(output.every((l) => l.response?.status_code === 200)).toBe(true);
  expect(counterValue(await gw.metrics(), "llmgw_batch_line_waits_total", { reason: "no_ready_endpoint" })).toBeGreaterThan(0);
}, 120_000);
