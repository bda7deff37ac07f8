/**
 * Scenario: llmgw.sqlite in data_dir is damaged (overwritten with garbage)
 * while the gateway is down. It starts anyway: chat completions are served,
 * Files and Batches answer 503 JOBS_UNAVAILABLE, an error line says what to
 * do and llmgw_jobs_store_available is 0; the damaged file is left exactly
 * as it was (nothing lost that a repair could save). Recovery as the docs
 * say — move the file aside, restart — brings jobs back.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STATE_DB_FILE } from "../../src/jobs/state-db.ts";
import { batchEnded, createBatchFrom, expectEachLineEndedOnce, openaiClient } from "../helpers/batch-e2e.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { counterValue, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

const MODEL = "sim-model";
const KEY = "sk-corrupt-db";
let sim: Sim;
let dataDir: string;
let config: Record<string, unknown>;

beforeAll(async () => {
  sim = await startSim(["--model", MODEL, "--itl-ms", "1", "--prefill-overhead-ms", "1"]);
  dataDir = mkdtempSync(join(tmpdir(), "llmgw-corrupt-db-"));
  config = { data_dir: dataDir, endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL] }], auth: { keys: [{ key: KEY, tenant: "t" }] } };
});

afterAll(async () => {
  await stopAll();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test("a corrupt llmgw.sqlite: inference served, jobs 503 with a loud log and a metric, the file untouched; moving it aside recovers", async () => {
  const dbPath = join(dataDir, STATE_DB_FILE);
  const garbage = Buffer.alloc(64 * 1024, "not a database, a disk error wrote here. ");
  writeFileSync(dbPath, garbage);

  let gw = await startGateway(config, 1);
  let client = openaiClient(gw.api, KEY);
  const chat = await client.chat.completions.create({ model: MODEL, max_tokens: 3, messages: [{ role: "user", content: "hello" }] });
  expect(chat.choices[0]?.message.content).toBeTruthy();
  const files = await fetch(`${gw.api}/v1/files`, { headers: { authorization: `Bearer ${KEY}` } });
  expect(files.status).toBe(503);
  expect(((await files.json()) as { error: { code: string } }).error.code).toBe("JOBS_UNAVAILABLE");
  expect(files.headers.get("retry-after")).not.toBeNull();
  expect(counterValue(await gw.metrics(), "llmgw_jobs_store_available")).toBe(0);
  expect(gw.output()).toContain("THE BATCH STORE IS CORRUPT");
  expect(Buffer.compare(readFileSync(dbPath), garbage)).toBe(0);
  await gw.stop("SIGTERM");

  // Recovery: move the damaged file (and any -wal, -shm) aside and start again.
  renameSync(dbPath, `${dbPath}.corrupt`);
  for (const ext of ["-wal", "-shm"]) if (existsSync(`${dbPath}${ext}`)) renameSync(`${dbPath}${ext}`, `${dbPath}${ext}.corrupt`);
  gw = await startGateway(config, 1);
  client = openaiClient(gw.api, KEY);
  const created = await createBatchFrom(client, chatBatchJsonl(20, MODEL));
  const done = await batchEnded(client, created.id, 60_000);
  expect(done.status).toBe("completed");
  await expectEachLineEndedOnce(client, done, 20);
  expect(counterValue(await gw.metrics(), "llmgw_jobs_store_available")).toBe(1);
}, 120_000);
