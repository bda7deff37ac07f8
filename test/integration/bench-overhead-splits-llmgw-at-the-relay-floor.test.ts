/**
 * `llmgw bench overhead`: every path of a small run answers every request,
 * and the report splits llmgw's main-thread CPU at its relay's floor
 * (bare-http1: bare Bun relaying the answer's bytes through JavaScript from
 * llmgw's HTTP/1.1 client). No timing verdict:
 * the bench measures, the test checks that it measures what it says.
 */
import { expect, test } from "bun:test";
import { runBenchJson } from "../helpers/bench-json.ts";

interface PathFigures {
  requests: number;
  errors: number;
  main_cpu_us_per_req: number | null;
}

interface Report {
  cases: {
    c10: {
      paths: Record<string, PathFigures>;
      relay_floor?: { floor_x_bare: number; llmgw_over_floor_us: number; llmgw_over_floor_x_bare: number };
    };
  };
}

test("a small c=10 run: every path answers all, bare-relay and bare-http1 beside bare, llmgw's CPU split at bare-http1", async () => {
  const r = await runBenchJson<Report>(["overhead", "--cases", "c10", "--rounds", "1", "--requests", "40", "--engines", "1"]);
  const c = r.cases.c10;
  for (const name of ["direct", "bare", "bare-relay", "bare-http1", "llmgw", "llmgw+kv", "llmgw+keys"]) {
    expect(c.paths[name]?.requests, name).toBe(40);
    expect(c.paths[name]?.errors, name).toBe(0);
  }
  const bare = c.paths.bare!.main_cpu_us_per_req!;
  const floor = c.paths["bare-http1"]!.main_cpu_us_per_req!;
  const gw = c.paths.llmgw!.main_cpu_us_per_req!;
  expect(bare).toBeGreaterThan(0);
  expect(c.relay_floor).toBeDefined();
  const f = c.relay_floor!;
  expect(f.floor_x_bare).toBeCloseTo(floor / bare, 6);
  expect(f.llmgw_over_floor_us).toBeCloseTo(gw - floor, 6);
  expect(f.llmgw_over_floor_x_bare).toBeCloseTo((gw - floor) / bare, 6);
}, 180_000);
