/**
 * The fleet twin decides as the gateway does. A real gateway in front of
 * three sim-engines records each scheduling decision it makes
 * (LLMGW_RECORD_DECISIONS) while prompts that share prefixes arrive eight
 * at a time; the twin's scheduling profile, built from the same config, gets
 * each recorded request, endpoint views and random draws in order, and must
 * pick the same endpoint every time (its prefix index built by its own
 * earlier decisions, as the gateway's was).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DecisionRecord } from "../../src/admission/decision-record.ts";
import { type SimEngine, startSimEngines } from "../../src/bench/sim-fleet.ts";
import { buildConfig } from "../../src/config/load.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { replayDecisions } from "../../src/twin/decision-replay.ts";

const MODEL = "picks-model";
const dir = mkdtempSync(join(tmpdir(), "twin-picks-"));
const file = join(dir, "decisions.jsonl");
let engines: SimEngine[] = [];
let gateway: LlmgwChild | undefined;
let mapping: Record<string, unknown>;

beforeAll(async () => {
  engines = await startSimEngines(3, MODEL, []);
  mapping = {
    listen: "127.0.0.1:0",
    admin_listen: "127.0.0.1:0",
    health: { poll_interval_ms: 50 },
    endpoints: engines.map((e) => ({ id: e.id, url: e.url, models: [MODEL] })),
  };
  gateway = await spawnLlmgw(["serve", "--config", writeGatewayConfig(mapping), "--log-level", "info"], { waitFor: 2, env: { LLMGW_RECORD_DECISIONS: file } });
  // Every engine ready before the first request, so every decision sees three candidates.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const body = (await (await fetch(`${gateway.urls.admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean }[] };
    if (body.endpoints.filter((e) => e.ready).length === 3) break;
    if (Date.now() > deadline) throw new Error("the gateway did not see three ready engines within 20 s");
    await Bun.sleep(50);
  }
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await Promise.all(engines.map((e) => e.child.stop()));
  rmSync(dir, { recursive: true, force: true });
});

/** Prompt `i`: one of five shared 2,000-character system prompts, then a question of its own. */
function prompt(i: number): string {
  const system = `system prompt ${i % 5} `.repeat(100).slice(0, 2_000);
  return `${system} question ${i}: what is ${i} squared?`;
}

test("every decision the gateway recorded, the twin's profile makes the same way", async () => {
  const api = gateway!.urls.api!;
  let next = 0;
  const worker = async () => {
    while (next < 160) {
      const i = next++;
      const r = await fetch(`${api}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, prompt: prompt(i), max_tokens: 6, stream: i % 2 === 0 }),
      });
      expect(r.status).toBe(200);
      await r.text();
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));

  const records = readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as DecisionRecord);
  expect(records.length).toBeGreaterThanOrEqual(160);
  // The decisions are worth replaying: all three endpoints chosen, loads that differ, prefixes that repeat.
  expect(new Set(records.map((r) => r.pick)).size).toBe(3);
  expect(records.some((r) => r.views.some((v) => v.inflight > 0))).toBe(true);
  expect(records.every((r) => r.views.length === 3)).toBe(true);

  const config = buildConfig(mapping);
  const result = replayDecisions(config, records);
  console.log(
    `replayed ${result.replayed} decisions (${result.skipped} skipped), ${result.differing.length} differ`,
    JSON.stringify(result.differing.slice(0, 5)),
  );
  expect(result.skipped).toBe(0);
  expect(result.replayed).toBe(records.length);
  expect(result.differing).toEqual([]);
  // And the replay would see a profile that decides otherwise: without the prefix scorer, some picks differ.
  const loadOnly = {
    scorers: [
      { name: "queue-depth", weight: 2 },
      { name: "kv-cache", weight: 1 },
      { name: "inflight", weight: 2 },
    ],
  };
  expect(replayDecisions(buildConfig({ ...mapping, scheduling: loadOnly }), records).differing.length).toBeGreaterThan(0);
}, 120_000);
