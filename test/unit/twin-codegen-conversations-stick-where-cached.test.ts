/**
 * llm-d's code-generation workload in the fleet twin, small: long
 * conversations (each turn resends the whole conversation so far) on four
 * Qwen3-32B TP2 pods. Sticky until saturated keeps each conversation where
 * its earlier turns are cached, so its hit rate and TTFT beat round-robin's;
 * every turn is answered; the report is the same bytes from the same seed.
 */
import { describe, expect, test } from "bun:test";
import { type CodegenReport, formatCodegenText, runCodegen } from "../../src/bench/routing/codegen-experiment.ts";
import { codegenConversations } from "../../src/bench/routing/codegen-workload.ts";
import { POLICY_DIR, routingPolicies, selectPolicies } from "../../src/bench/routing/policies.ts";
import { FULL_SIZE_GATEWAY_CONFIG, mergeConfig } from "../../src/bench/routing-scenario.ts";
import { parseTwinFaults } from "../../src/twin/faults.ts";

/** Six conversations on four pods, seed 5, with the named policies (and faults). */
function run(policies: string[] = ["round-robin", "token-aware"], faults: string[] = []): Promise<CodegenReport> {
  return runCodegen({
    policies: selectPolicies(routingPolicies(POLICY_DIR), policies),
    concurrency: [6],
    pods: 4,
    seed: 5,
    gateway: (policy) => mergeConfig(FULL_SIZE_GATEWAY_CONFIG, policy.gateway),
    kvEventDelayMs: 2,
    engineArgs: [],
    ...(faults.length > 0 ? { faults: parseTwinFaults(faults, 4) } : {}),
  });
}

/** The report without what times the run itself. */
function stable(r: CodegenReport): unknown {
  return { ...r, run: { ...r.run, date: "" }, policies: r.policies.map((p) => ({ ...p, points: p.points.map((pt) => ({ ...pt, wall_s: 0 })) })) };
}

describe("code-generation conversations in the twin", () => {
  test("each turn resends the conversation so far, within the context length", () => {
    const cs = codegenConversations(50, 1, 131_072);
    for (const c of cs) {
      expect(c.systemTokens).toBeGreaterThanOrEqual(3_000);
      expect(c.systemTokens).toBeLessThanOrEqual(100_000);
      const context = c.systemTokens + c.turns.reduce((n, t) => n + t.inputTokens + t.outputTokens, 0);
      expect(context).toBeLessThanOrEqual(131_072);
    }
    expect(codegenConversations(50, 1, 131_072)).toEqual(cs);
  });

  test("sticky until saturated keeps each conversation where it is cached: more hits and a faster first token than round-robin, every turn answered, the same report from the same seed", async () => {
    const a = await run();
    const [rr, sticky] = a.policies.map((p) => p.points[0]!);
    console.log(JSON.stringify(a.policies.map((p) => ({ name: p.name, point: p.points[0] }))));
    for (const pt of [rr!, sticky!]) expect(pt.answered).toBe(pt.requests);
    expect(rr!.requests).toBeGreaterThan(8);
    expect(sticky!.prefix_cache_hit_rate).toBeGreaterThan(rr!.prefix_cache_hit_rate + 0.2);
    expect(sticky!.ttft_s.p50).toBeLessThan(rr!.ttft_s.p50 / 2);
    expect(stable(await run())).toEqual(stable(a));
  }, 120_000);
});

test("a pod killed mid-conversation: its streams are continued on others, every turn answered, the fault in the point's report", async () => {
  const r = await run(["token-aware"], ["kill:0@20s+30s", "kill:1@40s"]);
  const pt = r.policies[0]!.points[0]!;
  expect(pt.answered).toBe(pt.requests);
  const f = pt.failures!;
  expect({ refused: f.refused, broken: f.broken }).toEqual({ refused: 0, broken: 0 });
  expect(f.recoveries + f.retries).toBeGreaterThan(0);
  expect(f.faults.map((x) => x.outAtMs !== null)).toEqual([true, true]);
  expect(formatCodegenText(r)).toContain("kill:0@20s+30s");
});
