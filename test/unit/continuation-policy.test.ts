/** Which streams may be continued and where: the config's switches and the refusals learned at run time, kept across restarts. */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig } from "../../src/config/load.ts";
import { ContinuationPolicy, REFUSALS_FILE } from "../../src/gateway/continuation-policy.ts";
import type { Logger } from "../../src/shared/logger.ts";

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

describe("learned refusals across a restart", () => {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-refusals-"));
  const log = { warn: (o: object, msg: string) => warnings.push(`${msg} ${JSON.stringify(o)}`) } as unknown as Pick<Logger, "warn">;
  const warnings: string[] = [];
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("a refusal learned before a restart is still known after it while the endpoint keeps its URL; the file survives garbage", () => {
    const path = join(dir, "data", REFUSALS_FILE);
    const config = buildConfig({}, {}, "test").continuation;
    const urls = new Map([
      ["hosted", "https://api.example/v1"],
      ["ok-endpoint", "http://10.0.0.9:8000"],
    ]);
    const first = new ContinuationPolicy(config, { path, log, urls });
    expect(first.learnRefusal("hosted", "fb", "https://api.example/v1")).toBe(true);
    const again = new ContinuationPolicy(config, { path, log, urls });
    expect([again.target("hosted", "fb"), again.target("hosted", "other"), again.target("e1", "fb")]).toEqual([false, true, true]);
    expect(again.learnRefusal("hosted", "fb", "https://api.example/v1")).toBe(false);
    // The same id now names another engine: it is asked again.
    const moved = new ContinuationPolicy(config, { path, log, urls: new Map([["hosted", "http://10.0.0.7:8000"]]) });
    expect(moved.target("hosted", "fb")).toBe(true);

    for (const garbage of [
      "{not json",
      '{"a":1}',
      '[["x"], [1, 2, 3], "s", ["ok-endpoint", "ok-model"], ["ok-endpoint", "ok-model", "http://10.0.0.9:8000"]]',
    ]) {
      writeFileSync(path, garbage);
      const p = new ContinuationPolicy(config, { path, log, urls });
      expect(p.target("hosted", "fb")).toBe(true);
      expect(p.target("ok-endpoint", "ok-model")).toBe(garbage.startsWith("{"));
    }
    expect(warnings.some((w) => w.includes("not JSON"))).toBe(true);
  });

  test("a data_dir that cannot be written keeps the refusal in memory and says so", () => {
    const blocker = join(dir, "a-file");
    writeFileSync(blocker, "");
    const p = new ContinuationPolicy(buildConfig({}, {}, "test").continuation, { path: join(blocker, REFUSALS_FILE), log, urls: new Map() });
    expect(p.learnRefusal("e", "m", "http://e")).toBe(true);
    expect(p.target("e", "m")).toBe(false);
    expect(warnings.some((w) => w.includes("kept in memory only"))).toBe(true);
  });
});
