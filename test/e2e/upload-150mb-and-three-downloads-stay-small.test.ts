/**
 * Scenario: a valid 150 MB, 50,000-line JSONL upload through the real
 * `openai` client, then three concurrent downloads of it, while a prober
 * hits /healthz. The gateway streams both ways: its resident memory grows by
 * less than 64 MiB at the peak, its event loop stalls past 50 ms of its own
 * making (not waiting for a CPU) no more often than in an idle window of
 * the same length just before (plus one), and the bytes come back whole — nothing
 * lost or added, every line once.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { counterValue, type Gateway, startGateway } from "../helpers/cluster.ts";
import { groupRssBytes, sampleRss } from "../helpers/process-memory.ts";
import { stopAll } from "../helpers/processes.ts";

const MODEL = "sim-model";
const KEY = "sk-upload-tenant";
const LINES = 50_000;
const MiB = 1024 * 1024;
const IDLE_WINDOW_MS = 8_000;
let gw: Gateway;
let dir: string;
let inputPath: string;
let inputBytes = 0;
let inputSha = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "llmgw-upload-150mb-"));
  // ~3 KB a line, 50,000 lines: just over 150 MB, written to disk (the client streams it from there).
  const pad = "x".repeat(3_000);
  const parts: string[] = [];
  for (let i = 0; i < LINES; i++)
    parts.push(`${JSON.stringify({ custom_id: `req-${i}`, method: "POST", url: "/v1/embeddings", body: { model: MODEL, input: `${i} ${pad}` } })}\n`);
  const text = parts.join("");
  inputPath = join(dir, "input.jsonl");
  writeFileSync(inputPath, text);
  inputBytes = Buffer.byteLength(text);
  inputSha = createHash("sha256").update(text).digest("hex");
  gw = await startGateway({
    data_dir: join(dir, "data"),
    // No engine is needed to store a file: the endpoint's configured model is enough (its port refuses).
    endpoints: [{ id: "absent", url: "http://127.0.0.1:9", models: [MODEL] }],
    auth: { keys: [{ key: KEY, tenant: "uploads" }] },
  });
});

afterAll(async () => {
  await stopAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Stalls of the gateway's own making: a loop that was ready but waited for a CPU (cause cpu_wait) measured the host. */
async function stalls(): Promise<number> {
  return counterValue(await gw.metrics(), "llmgw_event_loop_stall_seconds_count", { cause: "gateway" });
}

test("a 150 MB upload and three concurrent 150 MB downloads: < 64 MiB more RSS, no stall over 50 ms, bytes whole", async () => {
  expect(inputBytes).toBeGreaterThan(150_000_000);
  const client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120_000 });
  // Warm: the first requests allocate what every request reuses.
  await client.files.list();
  await Bun.sleep(500);
  const pid = gw.proc.pid;
  let probes = 0;
  let probing = true;
  const prober = (async () => {
    while (probing) {
      await fetch(`${gw.admin}/healthz`);
      probes++;
      await Bun.sleep(20);
    }
  })();
  const idleStart = performance.now();
  const idleStallsBefore = await stalls();
  await Bun.sleep(IDLE_WINDOW_MS);
  const idleStalls = (await stalls()) - idleStallsBefore;
  const baseline = groupRssBytes(pid);
  const stallsBefore = await stalls();
  const busyStart = performance.now();

  const rssUpload = sampleRss(pid);
  const file = await client.files.create({ file: Bun.file(inputPath), purpose: "batch" });
  const uploadPeak = rssUpload.stop();
  expect(file).toMatchObject({ bytes: inputBytes, purpose: "batch", status: "processed" });

  const rssDownload = sampleRss(pid);
  const downloads = await Promise.all(
    [0, 1, 2].map(async () => {
      const res = await fetch(`${gw.api}/v1/files/${file.id}/content`, { headers: { authorization: `Bearer ${KEY}` } });
      const hash = createHash("sha256");
      let bytes = 0;
      let newlines = 0;
      for await (const chunk of res.body!) {
        hash.update(chunk);
        bytes += chunk.byteLength;
        for (const b of chunk) if (b === 0x0a) newlines++;
      }
      return { bytes, newlines, sha: hash.digest("hex") };
    }),
  );
  const downloadPeak = rssDownload.stop();
  probing = false;
  await prober;

  for (const d of downloads) expect(d).toEqual({ bytes: inputBytes, newlines: LINES, sha: inputSha });
  const stallCount = (await stalls()) - stallsBefore;
  const busyMs = performance.now() - busyStart;
  console.log(
    `baseline ${(baseline / MiB).toFixed(0)} MiB; upload peak +${((uploadPeak - baseline) / MiB).toFixed(1)} MiB; downloads peak +${((downloadPeak - baseline) / MiB).toFixed(1)} MiB; ` +
      `stalls over 50 ms: ${stallCount} in ${(busyMs / 1000).toFixed(1)} s (idle: ${idleStalls} in ${((busyStart - idleStart) / 1000).toFixed(1)} s); /healthz probes ${probes}`,
  );
  expect(uploadPeak - baseline).toBeLessThan(64 * MiB);
  expect(downloadPeak - baseline).toBeLessThan(64 * MiB);
  // Per second of the idle window, scaled to the busy one, plus one stall the machine may cause.
  expect(stallCount).toBeLessThanOrEqual(Math.ceil((idleStalls * busyMs) / IDLE_WINDOW_MS) + 1);
}, 180_000);
