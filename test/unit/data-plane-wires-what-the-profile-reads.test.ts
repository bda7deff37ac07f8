/**
 * The data plane is built in process (workers, no listener) for three
 * profiles over the same endpoint, which says where its engine publishes
 * KV-cache events: startup hashes prompt prefixes, follows KV events and
 * asks engines to tokenize only where a configured scorer declares it reads
 * them.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { buildConfig } from "../../src/config/load.ts";
import { KV } from "../../src/metrics/names.ts";
import { buildDataPlane, type DataPlane } from "../../src/serve/data-plane.ts";

const dir = mkdtempSync(join(tmpdir(), "llmgw-data-plane-"));
const planes: DataPlane[] = [];
afterAll(async () => {
  await Promise.all(planes.map((p) => p.close()));
  rmSync(dir, { recursive: true, force: true });
});

const LOAD = [
  { name: "queue-depth", weight: 2 },
  { name: "kv-cache", weight: 1 },
  { name: "inflight", weight: 2 },
];
// A closed port: the wiring is what is checked, not the stream.
const ENDPOINT = {
  id: "a",
  url: "http://127.0.0.1:1",
  models: ["m"],
  kv_events: { endpoint: "tcp://127.0.0.1:1", replay_endpoint: "tcp://127.0.0.1:2", topic: "kv" },
};
const LONG_CHAT = { model: "m", messages: [{ role: "user", content: "word ".repeat(2_000) }] };

async function build(scorers: { name: string; weight: number }[], profile: string) {
  const lines: string[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => lines.push(line) });
  const config = buildConfig({ data_dir: join(dir, profile), scheduling: { scorers }, endpoints: [ENDPOINT] });
  const plane = await buildDataPlane(config, { log, defaultMetrics: false });
  planes.push(plane);
  const skipped = async () => (await plane.ctx.metrics.registry.getSingleMetric(KV.tokenizeSkipped.name)!.get()).values.reduce((a, v) => a + v.value, 0);
  return { plane, lines, skipped };
}

test("a load-only profile wires no prefix hashing, follows no KV events and tokenizes nothing", async () => {
  const { plane, lines, skipped } = await build(LOAD, "load");
  expect(plane.ctx.usesPrefixHashes).toBe(false);
  expect(plane.workers.kvEvents).toBeUndefined();
  expect(await plane.ctx.promptTokens.keysFor(LONG_CHAT, "chat", "m", 2_000)).toBeUndefined();
  expect(await skipped()).toBe(0);
  expect(lines.some((l) => l.includes("kv_events") && l.includes("not followed"))).toBe(true);
});

test("a profile with prefix-affinity but no precise-prefix hashes prompt prefixes and still starts no KV-events subscriber or tokenizer", async () => {
  const { plane, skipped } = await build([...LOAD, { name: "prefix-affinity", weight: 3 }], "affinity");
  expect(plane.ctx.usesPrefixHashes).toBe(true);
  expect(plane.workers.kvEvents).toBeUndefined();
  expect(await plane.ctx.promptTokens.keysFor(LONG_CHAT, "chat", "m", 2_000)).toBeUndefined();
  expect(await skipped()).toBe(0);
});

test("precise-prefix at weight 0 counts for nothing, so nothing is wired for it", async () => {
  const { plane } = await build([...LOAD, { name: "precise-prefix", weight: 0 }], "zero");
  expect(plane.ctx.usesPrefixHashes).toBe(false);
  expect(plane.workers.kvEvents).toBeUndefined();
});

test("a profile with precise-prefix follows the endpoint's KV events and asks to tokenize (here: no live stream yet)", async () => {
  const { plane, lines, skipped } = await build([...LOAD, { name: "precise-prefix", weight: 3 }], "precise");
  expect(plane.ctx.usesPrefixHashes).toBe(true);
  expect(plane.workers.kvEvents?.following).toBe(true);
  expect(await plane.ctx.promptTokens.keysFor(LONG_CHAT, "chat", "m", 2_000)).toBeUndefined();
  // It tried: the endpoint's stream is followed but not live, so the request is routed on the estimate.
  expect(await skipped()).toBe(1);
  expect(lines.some((l) => l.includes("not followed"))).toBe(false);
});
