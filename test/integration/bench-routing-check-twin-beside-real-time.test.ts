/**
 * `llmgw bench routing --check` on a small schedule: the same two policies
 * run by sim-engine processes behind a real gateway, then by the fleet
 * twin. The twin places requests as the real stack does: output tokens a
 * second and the engines' prefix-cache hit rates close, the same ranking.
 * TTFT is not held here: a schedule this short is mostly its start, and a
 * first token shows every millisecond of a busy host (`bench routing
 * --check` at full length measures it, docs/fleet-twin.md).
 */
import { expect, test } from "bun:test";
import type { RoutingReport } from "../../src/bench/routing/routing-report.ts";
import { runBenchJson } from "../helpers/bench-json.ts";

interface CheckReport {
  real: RoutingReport;
  twin: RoutingReport;
  check: {
    policies: { name: string; output_tok_s: { real: number; twin: number; error: number } }[];
    ranking: { real: string[]; twin: string[]; same: boolean };
  };
}

test("the twin and the real-time stack agree on a small schedule: throughput, cache hits, ranking", async () => {
  // Two pods, one light stage: the host keeps up even beside other work.
  const r = await runBenchJson<CheckReport>([
    "routing",
    "--check",
    "--pods",
    "2",
    "--rates",
    "60",
    "--stage-s",
    "3",
    "--warmup-s",
    "0",
    "--policies",
    "random,default",
  ]);
  expect(r.real.run.clock).toBe("real-time");
  expect(r.twin.run.clock).toBe("twin");
  for (const rep of [r.real, r.twin]) for (const p of rep.policies) expect(p.figures.answered).toBe(p.figures.requests);
  // Output tokens a second within 25 % (the real stack's own run-to-run spread on a shared host is ~10 %).
  for (const p of r.check.policies) expect({ name: p.name, error: Math.abs(p.output_tok_s.error) < 0.25 }).toEqual({ name: p.name, error: true });
  // The engines' caches hit alike: the twin routed the prompts where the gateway did.
  const hits = (rep: RoutingReport, name: string) => rep.policies.find((p) => p.name === name)!.prefix_cache_hit_rate;
  for (const name of ["random", "default"]) expect(Math.abs(hits(r.real, name) - hits(r.twin, name))).toBeLessThan(0.1);
  // And the default's prefix scoring shows: half again random's hit rate at least (a 3 s stage is mostly cold misses).
  expect(hits(r.twin, "default")).toBeGreaterThan(1.5 * hits(r.twin, "random"));
  // Ranked alike wherever the real-time run tells them apart: at this light load their output is nearly equal, and a tie either way is noise.
  expect(r.check.ranking.same).toBe(true);
}, 180_000);
