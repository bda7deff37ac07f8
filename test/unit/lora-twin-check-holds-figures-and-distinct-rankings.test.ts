/**
 * `bench lora --check`'s comparison: the twin's error beside each figure,
 * output tok/s and TTFT held to ±10 %, and the ranking by adapter loads held
 * only where the real-time run tells two policies apart.
 */
import { expect, test } from "bun:test";
import type { LoraBenchReport, LoraPolicyResult } from "../../src/bench/lora-policies.ts";
import { loraTwinCheck } from "../../src/bench/lora-twin-check.ts";

function report(loads: Record<string, number>, ttftMs = 30): LoraBenchReport {
  const results = Object.entries(loads).map(
    ([policy, l]): LoraPolicyResult => ({
      policy: policy as LoraPolicyResult["policy"],
      requests: 1000,
      errors: 0,
      adapter_loads: l,
      loads_per_1000: l,
      ttft_p50_ms: ttftMs,
      ttft_p90_ms: ttftMs * 1.2,
      output_tokens: 100_000,
      output_tok_per_s: 2000,
      duration_s: 50,
    }),
  );
  return {
    scenario: "lora",
    clock: "real-time",
    replicas: 4,
    time_scale: 1,
    workload: {} as LoraBenchReport["workload"],
    top_shares: { top1: 0, top4: 0, top16: 0 },
    results,
  };
}

test("a pair within 10 % in the real-time run is a tie; a pair it tells apart must keep its order", () => {
  const real = report({ llmgw: 158, "load-only": 522, random: 511 });
  const tied = loraTwinCheck(real, report({ llmgw: 172, "load-only": 515, random: 535 }));
  expect(tied.ranking.same).toBe(true);
  expect(tied.met).toBe(true);
  expect(tied.policies[0]!.loads_per_1000.error).toBeCloseTo(14 / 158, 6);
  const swapped = loraTwinCheck(real, report({ llmgw: 600, "load-only": 515, random: 535 }));
  expect(swapped.ranking.same).toBe(false);
  expect(swapped.met).toBe(false);
});

test("TTFT off by more than 10 % misses the fidelity target", () => {
  const c = loraTwinCheck(report({ llmgw: 158, random: 511 }, 30), report({ llmgw: 158, random: 511 }, 26));
  expect(c.policies[0]!.ttft_p50_ms.error).toBeCloseTo(-4 / 30, 6);
  expect(c.met).toBe(false);
});
