/**
 * Scenario: two tenants' batches are running when the gateway is killed;
 * one batch's stored record is damaged (invalid JSON) before the restart.
 * That batch is failed with `batch_record_corrupt`; the other tenant's batch
 * runs on and completes with every line once (nothing lost, nothing twice).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStateDatabase } from "../../src/jobs/state-db.ts";
import { batchEnded, createBatchFrom, expectEachLineEndedOnce, linesDone, openaiClient } from "../helpers/batch-e2e.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-model";
const LINES = 200;
let sim: Sim;
let dataDir: string;
let config: Record<string, unknown>;

beforeAll(async () => {
  sim = await startSim(["--model", MODEL, "--itl-ms", "10", "--prefill-overhead-ms", "5", "--max-num-seqs", "64"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-corrupt-row-"));
  config = {
    data_dir: dataDir,
    endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL] }],
    auth: {
      keys: [
        { key: "sk-tenant-a", tenant: "a" },
        { key: "sk-tenant-b", tenant: "b" },
      ],
    },
    batch: { concurrency_per_batch: 4, concurrency_per_tenant: 4 },
  };
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test("one batch row with invalid JSON fails that batch; the other tenant's batch completes, each line once", async () => {
  let gw = await startGateway(config, 1);
  const a = await createBatchFrom(openaiClient(gw.api, "sk-tenant-a"), chatBatchJsonl(LINES, MODEL, 10));
  const b = await createBatchFrom(openaiClient(gw.api, "sk-tenant-b"), chatBatchJsonl(LINES, MODEL, 10));
  await waitUntil(async () => (await linesDone(openaiClient(gw.api, "sk-tenant-b"), b.id)) >= 10, { timeoutMs: 60_000, what: "b under way" });
  await gw.stop("SIGKILL");
  const db = openStateDatabase(dataDir);
  db.query("UPDATE batches SET doc = '{\"id\": ' WHERE id = ?").run(a.id);
  db.close();

  gw = await startGateway(config, 1);
  const clientA = openaiClient(gw.api, "sk-tenant-a");
  const clientB = openaiClient(gw.api, "sk-tenant-b");
  const failed = await batchEnded(clientA, a.id, 30_000);
  expect(failed.status).toBe("failed");
  expect(failed.errors?.data?.[0]?.code).toBe("batch_record_corrupt");
  const done = await batchEnded(clientB, b.id);
  expect(done.status).toBe("completed");
  const { output } = await expectEachLineEndedOnce(clientB, done, LINES);
  expect(output.every((l) => l.response?.status_code === 200)).toBe(true);
  // Reported once, not every tick.
  const reports = gw
    .output()
    .split("\n")
    .filter((l) => l.includes("a batch record is corrupt")).length;
  expect(reports).toBe(1);
}, 120_000);
