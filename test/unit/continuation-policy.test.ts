/** Which streams may be continued and where (issue 13): the config's switches and the refusals learned at run time. */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import { ContinuationPolicy } from "../../src/gateway/continuation-policy.ts";

function policy(raw: Record<string, unknown>): ContinuationPolicy {
  return new ContinuationPolicy(buildConfig(raw, {}, "test").continuation);
}

describe("ContinuationPolicy", () => {
  test("on by default, two recoveries; off globally, per model and per endpoint", () => {
    const p = policy({
      models: [{ name: "a" }, { name: "b", continuation: false }],
      endpoints: [
        { id: "e1", url: "http://127.0.0.1:1" },
        { id: "hosted", url: "http://127.0.0.1:2", continuation: false },
      ],
    });
    expect([p.enabled, p.maxRecoveries]).toEqual([true, 2]);
    expect([p.modelOn("a"), p.modelOn("b"), p.modelOn("not-listed")]).toEqual([true, false, true]);
    expect([p.target("e1", "a"), p.target("hosted", "a")]).toEqual([true, false]);
    const off = policy({ continuation: { enabled: false, max_recoveries: 5 } });
    expect([off.enabled, off.maxRecoveries, off.modelOn("a")]).toEqual([false, 5, false]);
  });

  test("a refusal is learned once, per endpoint and model", () => {
    const p = policy({});
    expect(p.learnRefusal("e1", "a")).toBe(true);
    expect(p.learnRefusal("e1", "a")).toBe(false);
    expect([p.target("e1", "a"), p.target("e1", "b"), p.target("e2", "a")]).toEqual([false, true, true]);
  });

  test("a bad value names the key", () => {
    expect(() => policy({ continuation: { max_recoveries: 0 } })).toThrow("continuation.max_recoveries");
    expect(() => policy({ models: [{ name: "a", continuation: "no" }] })).toThrow("models[0].continuation");
  });
});
