/** Config validation reports schema and cross-field errors together, suggests the nearest key for a misspelt one, and stays bounded on hostile documents. */
import { describe, expect, test } from "bun:test";
import { nearestKey } from "../../src/config/key-suggestions.ts";
import { buildConfig, ConfigError } from "../../src/config/load.ts";
import { issuesOf } from "../helpers/config-issues.ts";

describe("every error at once", () => {
  test("three independent errors, one of them cross-field, are all reported in one error", () => {
    const issues = issuesOf(() => buildConfig({ listen: "nope", retry: { max_attempts: 0 }, admission: { default_band: "gold" } }));
    expect(issues.map((i) => i.slice(0, i.indexOf(":")))).toEqual(["listen", "retry.max_attempts", "admission.default_band"]);
    expect(issues[0]).toBe("listen: expected HOST:PORT, e.g. 127.0.0.1:8080, got 'nope'");
    expect(issues[2]).toBe("admission.default_band: unknown band 'gold' (expected one of interactive, standard, batch)");
  });

  test("cross-field errors beside a bad value inside an array element, and an object's own rule found once its fields parse", () => {
    const issues = issuesOf(() =>
      buildConfig({
        models: [{ name: "m", fallback: ["nowhere"] }],
        tenants: [{ name: "t" }, { name: "t" }],
        auth: { keys: [{ key: "short", key_sha256: "b".repeat(64), tenant: "t" }] },
      }),
    );
    expect(issues).toContain("models[0].fallback[0]: unknown model 'nowhere' (expected a name under models)");
    expect(issues).toContain("tenants[1].name: duplicate tenant 't'");
    expect(issues.some((i) => i.startsWith("auth.keys[0].key: "))).toBe(true);
    expect(issues).toContain("auth.keys[0]: expected exactly one of key_sha256 or key");
  });

  test("a cross-field check whose input failed is skipped, not judged on a default or crashed", () => {
    // The bands failed: default_band is not checked against the default bands, nor a key's max_band.
    const issues = issuesOf(() =>
      buildConfig({
        admission: { bands: [{ name: "gold", ceiling: "high" }], default_band: "gold" },
        auth: { keys: [{ key: "a-key-long-enough", tenant: "t", max_band: "gold" }] },
        endpoints: [
          { id: "a", url: "ftp://x" },
          { id: "a", url: "http://127.0.0.1:1" },
        ],
      }),
    );
    expect(issues.some((i) => i.startsWith("admission.bands[0].ceiling: "))).toBe(true);
    expect(issues).toContain("endpoints[0].url: expected an http(s) URL");
    expect(issues.filter((i) => i.includes("gold") || i.includes("duplicate endpoint"))).toEqual([]);
  });

  test("a valid config still loads, and a cross-field error alone is reported as before", () => {
    expect(buildConfig({ retry: { max_attempts: 2 } }).retry.maxAttempts).toBe(2);
    expect(issuesOf(() => buildConfig({ deadlines: { total_ms: 10, first_token_ms: 20 } }))).toEqual([
      "deadlines.total_ms: expected at least deadlines.first_token_ms (20)",
    ]);
  });
});

describe("did you mean", () => {
  test("a misspelt key at the top level and nested gets the nearest known key at that level", () => {
    const issues = issuesOf(() =>
      buildConfig({ max_body_btyes: 1, helth: {}, retry: { max_atempts: 2 }, endpoints: [{ id: "a", url: "http://127.0.0.1:1", modles: ["m"] }] }),
    );
    expect(issues).toContain("max_body_btyes: unknown key (did you mean 'max_body_bytes'?)");
    expect(issues).toContain("helth: unknown key (did you mean 'health'?)");
    expect(issues).toContain("retry.max_atempts: unknown key (did you mean 'max_attempts'?)");
    expect(issues).toContain("endpoints[0].modles: unknown key (did you mean 'models'?)");
  });

  test("case and dashes are not typos: Max-Body-Bytes is max_body_bytes", () => {
    expect(issuesOf(() => buildConfig({ "Max-Body-Bytes": 1 }))).toEqual(["Max-Body-Bytes: unknown key (did you mean 'max_body_bytes'?)"]);
  });

  test("a far-off key gets no suggestion", () => {
    expect(issuesOf(() => buildConfig({ zebra_crossing: 1, retry: { q: 1 } })).sort()).toEqual(["retry.q: unknown key", "zebra_crossing: unknown key"]);
  });

  test("the threshold grows with the key's length", () => {
    expect(nearestKey("lstn", ["listen"])).toBeUndefined();
    expect(nearestKey("listn", ["listen"])).toBe("listen");
    expect(nearestKey("poll_intervl_s", ["poll_interval_ms"])).toBe("poll_interval_ms");
    expect(nearestKey("a".repeat(1000), ["a"])).toBeUndefined();
  });
});

describe("hostile documents get a clear, bounded answer", () => {
  test("10,000 unknown keys: twenty named, the rest counted", () => {
    const raw: Record<string, number> = {};
    for (let i = 0; i < 10_000; i++) raw[`key_${i}`] = i;
    const issues = issuesOf(() => buildConfig(raw));
    expect(issues).toHaveLength(21);
    expect(issues[0]).toBe("key_0: unknown key");
    expect(issues[20]).toBe("(root): and 9980 more unknown key(s)");
  });

  test("nesting deeper than a config can is refused by path, without overflowing the stack", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    expect(issuesOf(() => buildConfig({ retry: deep }))).toEqual(["retry.a.a.a.a.a.a.a…: nested deeper than 64 levels"]);
  });

  test("odd characters in key names are quoted and escaped, long ones cut: one line per issue", () => {
    const issues = issuesOf(() => buildConfig({ "evil\nkey\u202e\u0000": 1, ["x".repeat(5000)]: 2, "a.b": 3 }));
    expect(issues).toEqual(['["evil\\nkey\\u202e\\u0000"]: unknown key', `["${"x".repeat(40)}…"]: unknown key`, '["a.b"]: unknown key']);
    for (const i of issues) expect([...i].some((c) => c === "\n" || c.charCodeAt(0) < 0x20 || c === "\u202e")).toBe(false);
  });

  test("many errors: fifty listed, then how many more; each line bounded", () => {
    const endpoints = Array.from({ length: 80 }, (_, i) => ({ id: `e${i}`, url: `ftp://${"h".repeat(1000)}` }));
    const err = (() => {
      try {
        buildConfig({ endpoints, max_endpoints: 100 });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    const issues = (err as ConfigError).issues;
    expect(issues).toHaveLength(51);
    expect(issues[50]).toBe("… and 30 more issue(s)");
    expect(Math.max(...issues.map((i) => i.length))).toBeLessThanOrEqual(301);
  });
});
