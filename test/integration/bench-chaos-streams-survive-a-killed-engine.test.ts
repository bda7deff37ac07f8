/** `llmgw bench chaos` in small: one of two sim-engines killed and restarted under streaming load; every stream it cut is continued, none fails. */
import { expect, test } from "bun:test";
import { runChaos } from "../../src/bench/chaos-scenario.ts";

test("60 streams, an engine killed on a schedule: every answer whole and byte-identical, each cut stream recovered", async () => {
  const r = await runChaos({ engines: 2, streams: 60, concurrency: 20, tokens: 48, itlMs: 10, killEveryMs: 600, downMs: 300, budgetRatio: 1 });
  expect({ failed: r.failed, failures: r.first_failures }).toEqual({ failed: 0, failures: [] });
  expect(r.completed_intact).toBe(60);
  expect(r.kills).toBeGreaterThanOrEqual(1);
  expect(r.cut_by_a_kill).toBeGreaterThan(0);
  expect(r.recovered).toBeGreaterThan(0);
  expect(r.recovery_results).toEqual({ recovered: r.recovered });
  expect(r.recovered_ttft_ms.p50).toBeGreaterThan(0);
}, 120_000);
