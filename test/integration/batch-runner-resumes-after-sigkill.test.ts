/**
 * A runner process SIGKILLed mid-batch (1,000 lines against a real
 * sim-engine) and started again on the same data directory: the batch
 * completes with every custom_id exactly once in the output, and the engine
 * saw at most the lines leased at the kill twice: those in flight, and those
 * whose results the runner still held to write together (at most
 * DEFAULT_RESULT_FLUSH_LINES); lines it had claimed ahead were never sent.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseBatchInput } from "../../src/jobs/batch-input.ts";
import { DEFAULT_RESULT_FLUSH_LINES } from "../../src/jobs/pending-results.ts";
import { SqliteJobsStore } from "../../src/jobs/sqlite-jobs-store.ts";
import { filesDirOf, openStateDatabase } from "../../src/jobs/state-db.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { type Sim, startSim } from "../helpers/cluster.ts";
import { batchDoc, contentText } from "../helpers/jobs-store-contract.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-model";
const LINES = 1000;
const CONCURRENCY = 16;
const SCRIPT = join(import.meta.dir, "..", "helpers", "batch-runner-process.ts");

let sim: Sim;
let dataDir: string;
const children: Bun.Subprocess[] = [];

beforeAll(async () => {
  // ~40 ms a line at 16 in flight: the batch takes a few seconds, so the kill lands mid-way.
  sim = await startSim(["--model", MODEL, "--itl-ms", "10", "--prefill-overhead-ms", "5"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-batch-restart-"));
});

afterAll(async () => {
  for (const c of children) {
    try {
      process.kill(-c.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function startRunner(): Promise<Bun.Subprocess<"ignore", "pipe", "inherit">> {
  const child = Bun.spawn([process.execPath, SCRIPT, dataDir, sim.api, String(CONCURRENCY)], {
    env: childEnv(),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit",
    detached: true,
  });
  children.push(child);
  const reader = child.stdout.getReader();
  let out = "";
  while (!out.includes("runner started")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`runner exited before starting: ${out}`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return child;
}

test("SIGKILL mid-batch, restart: the batch completes with nothing lost or duplicated", async () => {
  const db = openStateDatabase(dataDir);
  const store = new SqliteJobsStore(db, filesDirOf(dataDir));
  const parsed = parseBatchInput(new TextEncoder().encode(chatBatchJsonl(LINES, MODEL, 3)), {
    maxLines: LINES,
    knownModel: () => true,
    maxLineBytes: 1 << 20,
    maxDepth: 64,
  });
  const now = Date.now();
  await store.createBatch(batchDoc("batch_restart", "t", { createdAtMs: now, inProgressAtMs: now, expiresAtMs: now + 86_400_000 }), [parsed.lines]);

  const first = await startRunner();
  await waitUntil(async () => ((await store.getBatch("t", "batch_restart"))?.counts.completed ?? 0) >= 300, {
    timeoutMs: 60_000,
    intervalMs: 20,
    what: "300 lines done",
  });
  process.kill(-first.pid, "SIGKILL");
  await first.exited;
  const atKill = await store.getBatch("t", "batch_restart");
  // Claimed by the dead runner, never recorded: these are what may reach the engine twice — in flight, answered
  // with the result not written yet, or claimed ahead of a free slot (never sent).
  const inFlight = db.query<{ n: number }, []>("SELECT count(*) AS n FROM batch_lines WHERE state = 'running'").get()!.n;
  expect(atKill!.counts.completed).toBeLessThan(LINES);
  expect(inFlight).toBeGreaterThan(0);
  expect(inFlight).toBeLessThanOrEqual(CONCURRENCY + Math.ceil(CONCURRENCY / 4) + DEFAULT_RESULT_FLUSH_LINES);

  const second = await startRunner();
  const done = await waitUntil(
    async () => {
      const b = await store.getBatch("t", "batch_restart");
      return b?.status === "completed" ? b : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 50, what: "batch completed after restart" },
  );
  process.kill(-second.pid, "SIGKILL");

  expect(done.counts).toMatchObject({ total: LINES, completed: LINES, failed: 0 });
  const output = (await contentText(store, "t", done.outputFileId!))!.trim().split("\n");
  const ids = output.map((l) => (JSON.parse(l) as { custom_id: string }).custom_id);
  expect(ids.length).toBe(LINES);
  expect(new Set(ids).size).toBe(LINES);
  // Engine side: every line once, plus at most the lines that were leased when the runner died.
  const engineRequests = Number((await sim.state()).requests_total);
  expect(engineRequests).toBeGreaterThanOrEqual(LINES);
  expect(engineRequests).toBeLessThanOrEqual(LINES + inFlight);
}, 180_000);
