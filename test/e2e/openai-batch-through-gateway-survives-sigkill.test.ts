/**
 * Scenario: the real `openai` client against `llmgw serve` uploads a
 * 1,000-line JSONL, creates a batch and polls it; the gateway is SIGKILLed
 * mid-batch and started again on the same data_dir; the client (pointed at
 * the new port) sees the batch complete and downloads an output with every
 * custom_id exactly once. The engine saw every line once, plus at most the
 * lines the dead gateway had in flight.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { DEFAULT_RESULT_FLUSH_LINES } from "../../src/jobs/pending-results.ts";
import { openStateDatabase } from "../../src/jobs/state-db.ts";
import { chatBatchJsonl, expectEveryLineOnce } from "../helpers/batch-send.ts";
import { type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-model";
const LINES = 1000;
const CONCURRENCY = 16;
const KEY = "sk-batch-tenant-0";
let sim: Sim;
let dataDir: string;
let config: Record<string, unknown>;

beforeAll(async () => {
  // ~40 ms a line at 16 in flight: a few seconds for the batch, so the kill lands mid-way.
  sim = await startSim(["--model", MODEL, "--itl-ms", "10", "--prefill-overhead-ms", "5", "--max-num-seqs", "64"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-batch-e2e-"));
  config = {
    data_dir: dataDir,
    endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL] }],
    auth: { keys: [{ key: KEY, tenant: "evals" }] },
    batch: { concurrency_per_batch: CONCURRENCY, concurrency_per_tenant: CONCURRENCY },
  };
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test("1,000 lines through the gateway with the openai client; SIGKILL mid-batch, restart: nothing lost or duplicated", async () => {
  let gw = await startGateway(config, 1);
  let client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: KEY, maxRetries: 0 });
  const file = await client.files.create({ file: await toFile(Buffer.from(chatBatchJsonl(LINES, MODEL, 3)), "evals.jsonl"), purpose: "batch" });
  expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "evals.jsonl", status: "processed" });
  const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  expect(created.request_counts).toEqual({ total: LINES, completed: 0, failed: 0 });

  await waitUntil(
    async () => {
      const b = await client.batches.retrieve(created.id);
      return (b.request_counts?.completed ?? 0) >= 300;
    },
    { timeoutMs: 60_000, intervalMs: 20, what: "300 lines done" },
  );
  await gw.stop("SIGKILL");
  // Claimed by the dead gateway and never recorded: these may reach the engine twice — in flight, answered
  // with the result not written yet, or claimed ahead of a free slot (never sent).
  const db = openStateDatabase(dataDir);
  const inFlight = db.query<{ n: number }, []>("SELECT count(*) AS n FROM batch_lines WHERE state = 'running'").get()!.n;
  const doneAtKill = db.query<{ n: number }, []>("SELECT count(*) AS n FROM batch_lines WHERE state = 'done'").get()!.n;
  db.close();
  expect(doneAtKill).toBeLessThan(LINES);
  expect(inFlight).toBeGreaterThan(0);
  expect(inFlight).toBeLessThanOrEqual(CONCURRENCY + Math.ceil(CONCURRENCY / 4) + DEFAULT_RESULT_FLUSH_LINES);

  gw = await startGateway(config, 1);
  client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: KEY, maxRetries: 0 });
  const done = await waitUntil(
    async () => {
      const b = await client.batches.retrieve(created.id);
      return b.status === "completed" ? b : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 100, what: "batch completed after the restart" },
  );
  expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
  const text = await (await client.files.content(done.output_file_id!)).text();
  expectEveryLineOnce(text, LINES);
  // Engine side: every line once, plus at most the lines in flight when the gateway died.
  const engineRequests = Number((await sim.state()).requests_total);
  expect(engineRequests).toBeGreaterThanOrEqual(LINES);
  expect(engineRequests).toBeLessThanOrEqual(LINES + inFlight);
  // Audit: the lines ran as the batch's tenant in the batch band, each naming the batch; then one line for the batch.
  // (The test keeps only the tail of the gateway's output: the last few hundred lines.)
  const audits = await waitUntil(
    () => {
      // The tail's first line may be cut: only whole JSON lines.
      const all = gw
        .output()
        .split("\n")
        .filter((l) => l.startsWith("{") && l.includes('"msg":"audit"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      return all.some((a) => a.audit === "batch" && a.batch_id === created.id) ? all : undefined;
    },
    { what: "the batch's audit line" },
  );
  const lineAudits = audits.filter((a) => a.audit === "request" && a.batch_id === created.id);
  expect(lineAudits.length).toBeGreaterThan(100);
  expect(lineAudits.every((a) => a.tenant === "evals" && a.band === "batch" && a.endpoint === "sim-0" && a.outcome === "ok")).toBe(true);
  expect(audits.find((a) => a.audit === "batch")).toMatchObject({
    outcome: "completed",
    tenant: "evals",
    lines: { total: LINES, completed: LINES, failed: 0 },
  });
}, 180_000);
