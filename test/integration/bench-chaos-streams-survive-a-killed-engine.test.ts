/** `llmgw bench chaos` in small: one of two sim-engines killed and restarted under streaming load; every stream it cut is continued, none fails. */
import { expect, test } from "bun:test";
import { runChaos } from "../../src/bench/chaos-scenario.ts";

test("60 streams, an engine killed on a schedule: every answer whole and byte-identical, each cut stream recovered", async () => {
  // 96 tokens a stream (~1 s each, ~3 s of load): several kills, each landing mostly on streams past their first token,
  // so one kill that caught only prefills (a busy host stretches them) cannot leave the run without a cut stream.
  const r = await runChaos({ engines: 2, streams: 60, concurrency: 20, tokens: 96, itlMs: 10, killEveryMs: 600, downMs: 300, budgetRatio: 1 });
  expect({ failed: r.failed, failures: r.first_failures }).toEqual({ failed: 0, failures: [] });
  expect(r.completed_intact).toBe(60);
  expect(r.kills).toBeGreaterThanOrEqual(1);
  expect(r.cut_by_a_kill).toBeGreaterThan(0);
  expect(r.recovered).toBeGreaterThan(0);
  expect(r.recovery_results).toEqual({ recovered: r.recovered });
  expect(r.recovered_ttft_ms.p50).toBeGreaterThan(0);
}, 120_000);
