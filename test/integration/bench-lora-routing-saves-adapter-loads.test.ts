/**
 * `llmgw bench lora`'s module, small: the workload is deterministic and
 * skewed as asked, and through real gateways over fresh sim-engines the
 * llmgw profile makes fewer adapter loads than random routing in the same
 * run (a relative property with a margin, not a figure). Two replicas × 4 slots hold the 8 adapters between them, one holds half: where affinity matters most..
 */
import { afterAll, describe, expect, test } from "bun:test";
import { runLoraBench } from "../../src/bench/lora-scenario.ts";
import { buildLoraWorkload, DEFAULT_LORA_WORKLOAD, loraSimArgs, zipfWeights } from "../../src/bench/lora-workload.ts";
import { stopAll } from "../helpers/processes.ts";

afterAll(stopAll);

describe("the LoRA workload", () => {
  test("seeded, Zipf-skewed, Poisson-timed, and the sims it asks for list every adapter", () => {
    const o = { ...DEFAULT_LORA_WORKLOAD, adapters: 16, requests: 4000, warmup: 0, ratePerS: 50 };
    const a = buildLoraWorkload(o);
    expect(buildLoraWorkload(o).requests.map((r) => r.adapter)).toEqual(a.requests.map((r) => r.adapter));
    const counts = new Map<string, number>();
    for (const r of a.requests) counts.set(r.adapter, (counts.get(r.adapter) ?? 0) + 1);
    const w = zipfWeights(16, 1);
    // The most popular adapter gets its Zipf share, within sampling noise.
    expect(Math.abs((counts.get("adapter-0") ?? 0) / 4000 - w[0]!)).toBeLessThan(0.03);
    expect(counts.get("adapter-0")!).toBeGreaterThan(4 * (counts.get("adapter-15") ?? 0));
    // 4,000 arrivals at 50/s: about 80 s.
    expect(a.requests.at(-1)!.atMs / 1000).toBeGreaterThan(70);
    expect(a.requests.at(-1)!.atMs / 1000).toBeLessThan(90);
    const args = loraSimArgs(a);
    expect(args).toContain("--enable-lora");
    expect(args.filter((x) => x.startsWith("adapter-") && x.includes("="))).toHaveLength(16);
  });
});

test("llmgw routing loads fewer adapters than random routing, same workload, same run", async () => {
  const r = await runLoraBench({
    workload: { ...DEFAULT_LORA_WORKLOAD, adapters: 8, maxLoras: 4, requests: 200, warmup: 40, ratePerS: 40, maxTokens: 16 },
    replicas: 2,
    policies: ["llmgw", "random"],
    timeScale: 2,
  });
  const [mine, random] = r.results;
  console.log(
    `bench lora (small): llmgw ${mine!.loads_per_1000.toFixed(0)} vs random ${random!.loads_per_1000.toFixed(0)} loads per 1000; TTFT p90 ${mine!.ttft_p90_ms.toFixed(0)} vs ${random!.ttft_p90_ms.toFixed(0)} ms`,
  );
  expect(mine!.errors).toBe(0);
  expect(random!.errors).toBe(0);
  expect(mine!.adapter_loads).toBeGreaterThan(0);
  expect(mine!.loads_per_1000).toBeLessThan(random!.loads_per_1000 * 0.6);
}, 120_000);

test("in the fleet twin, the same workload: llmgw loads fewer adapters than random, and the same run twice gives the same figures", async () => {
  const options = {
    workload: { ...DEFAULT_LORA_WORKLOAD, adapters: 8, maxLoras: 4, requests: 200, warmup: 40, ratePerS: 40, maxTokens: 16 },
    replicas: 2,
    policies: ["llmgw", "random"] as const,
    timeScale: 1,
    twin: true,
  };
  const r = await runLoraBench({ ...options, policies: [...options.policies] });
  const [mine, random] = r.results;
  console.log(`bench lora --twin (small): llmgw ${mine!.loads_per_1000.toFixed(0)} vs random ${random!.loads_per_1000.toFixed(0)} loads per 1000`);
  expect(r.clock).toBe("twin");
  for (const p of r.results) expect({ policy: p.policy, errors: p.errors, requests: p.requests }).toEqual({ policy: p.policy, errors: 0, requests: 200 });
  expect(mine!.adapter_loads).toBeGreaterThan(0);
  expect(mine!.loads_per_1000).toBeLessThan(random!.loads_per_1000 * 0.6);
  expect((await runLoraBench({ ...options, policies: [...options.policies] })).results).toEqual(r.results);
}, 60_000);
