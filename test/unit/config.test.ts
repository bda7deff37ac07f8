import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as D from "../../src/config/defaults.ts";
import { applyEnvOverrides, buildConfig, parseConfigText } from "../../src/config/load.ts";
import { issuesOf } from "../helpers/config-issues.ts";

const ROOT = join(import.meta.dir, "..", "..");

describe("config loading", () => {
  test("defaults apply to an empty document and the result is frozen", () => {
    const c = buildConfig({});
    expect(c.listen).toEqual({ host: "0.0.0.0", port: 8080 });
    expect(c.adminListen).toEqual({ host: "127.0.0.1", port: 9090 });
    expect(c.deadlines.firstTokenMs).toBe(D.DEFAULT_FIRST_TOKEN_TIMEOUT_MS);
    expect(c.health.pollIntervalMs).toBe(D.DEFAULT_HEALTH_POLL_INTERVAL_MS);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.scheduling.scorers)).toBe(true);
  });

  test("the documented example file is valid", () => {
    const text = readFileSync(join(ROOT, "config", "llmgw.example.yaml"), "utf8");
    const c = parseConfigText(text, "llmgw.example.yaml");
    expect(c.endpoints.map((e) => e.id)).toEqual(["llama8b-a", "llama70b-a"]);
    expect(c.models[0]!.deadlines.firstTokenMs).toBe(30_000);
    // model deadlines inherit the top-level ones they do not override
    expect(c.models[0]!.deadlines.idleMs).toBe(c.deadlines.idleMs);
    expect(c.endpoints[0]!.kvEvents).toEqual({ endpoint: "tcp://10.0.0.11:5557", replayEndpoint: "tcp://10.0.0.11:5558", topic: "" });
    expect(c.endpoints[1]!.kvEvents).toBeUndefined();
    // The example states the defaults.
    expect(c.kvEvents).toEqual(buildConfig({}).kvEvents);
    expect(c.scheduling.scorers).toEqual(buildConfig({}).scheduling.scorers);
  });

  test("kv_events: an endpoint's sockets, the gateway's block; bad values name the key", () => {
    const c = buildConfig({
      endpoints: [{ id: "a", url: "http://h:1", kv_events: { endpoint: "tcp://h:5557" } }],
      kv_events: { index_blocks: 4096, tokenize: { timeout_ms: 5 } },
    });
    expect(c.endpoints[0]!.kvEvents).toEqual({ endpoint: "tcp://h:5557", replayEndpoint: null, topic: "" });
    expect(c.kvEvents.indexBlocks).toBe(4096);
    expect(c.kvEvents.tokenize).toMatchObject({ timeoutMs: 5, minPromptTokens: 128 });
    const issues = issuesOf(() =>
      buildConfig({
        endpoints: [{ id: "a", url: "http://h:1", kv_events: { endpoint: "tcp://*:5557", replay_endpoint: "http://h:1" } }],
        kv_events: { index_blocks: 10, tokenize: { nope: 1 } },
      }),
    );
    expect(issues).toContain("endpoints[0].kv_events.endpoint: expected a ZMQ address tcp://HOST:PORT, e.g. tcp://10.0.0.5:5557, got 'tcp://*:5557'");
    expect(issues.some((i) => i.startsWith("endpoints[0].kv_events.replay_endpoint: expected a ZMQ address"))).toBe(true);
    expect(issues.some((i) => i.startsWith("kv_events.index_blocks:"))).toBe(true);
    expect(issues.some((i) => i.startsWith("kv_events.tokenize.nope: unknown key"))).toBe(true);
  });

  test("retry.same_endpoint: timeouts move on by default, each class overridable, a bad value names the key", () => {
    const c = buildConfig({});
    expect(c.retry.sameEndpoint.headers_timeout).toBe("last_resort");
    expect(c.retry.sameEndpoint.first_token_timeout).toBe("last_resort");
    expect(c.retry.sameEndpoint.status_5xx).toBe("before_fallback");
    const set = buildConfig({ retry: { same_endpoint: { headers_timeout: "before_fallback", status_429: "never" } } });
    expect([set.retry.sameEndpoint.headers_timeout, set.retry.sameEndpoint.status_429, set.retry.sameEndpoint.connect]).toEqual([
      "before_fallback",
      "never",
      "before_fallback",
    ]);
    const issues = issuesOf(() => buildConfig({ retry: { same_endpoint: { headers_timeout: "sometimes" } } }));
    expect(issues.some((i) => i.startsWith("retry.same_endpoint.headers_timeout:"))).toBe(true);
    expect(issuesOf(() => buildConfig({ retry: { same_endpoint: { idle_timeout: "never" } } })).some((i) => i.includes("idle_timeout"))).toBe(true);
  });

  test("circuit_breaker.probe: on by default, every 2 s, 5 s deadline; a bad value names the key", () => {
    expect(buildConfig({}).circuitBreaker.probe).toEqual({
      enabled: true,
      intervalMs: D.DEFAULT_CIRCUIT_PROBE_INTERVAL_MS,
      timeoutMs: D.DEFAULT_CIRCUIT_PROBE_TIMEOUT_MS,
    });
    expect(buildConfig({ circuit_breaker: { probe: { enabled: false } } }).circuitBreaker.probe.enabled).toBe(false);
    expect(
      issuesOf(() => buildConfig({ circuit_breaker: { probe: { interval_ms: 5 } } })).some((i) => i.startsWith("circuit_breaker.probe.interval_ms:")),
    ).toBe(true);
  });

  test("a bad endpoint URL names the key path and what was expected", () => {
    const issues = issuesOf(() =>
      buildConfig({
        endpoints: [
          { id: "a", url: "http://x:1" },
          { id: "b", url: "http://y:1" },
          { id: "c", url: "ftp://nope" },
        ],
      }),
    );
    expect(issues).toContain("endpoints[2].url: expected an http(s) URL");
  });

  test("unknown keys, wrong types and unknown plugin names are reported with paths", () => {
    const issues = issuesOf(() => buildConfig({ listen: 8080, helth: {}, scheduling: { scorers: [{ name: "vibes", weight: 1 }], picker: "best" } }));
    expect(issues.some((i) => i.startsWith("listen:"))).toBe(true);
    expect(issues.some((i) => i === "helth: unknown key (did you mean 'health'?)")).toBe(true);
    expect(issues.some((i) => i.startsWith("scheduling.scorers[0].name:"))).toBe(true);
    expect(issues.some((i) => i.startsWith("scheduling.picker:"))).toBe(true);
  });

  test("a removed key (relay_variant) is accepted whatever its value, with one warning, and left out of the effective config", () => {
    for (const value of ["direct", "event", "something-else"]) {
      const c = buildConfig({ relay_variant: value });
      expect(c.warnings.filter((w) => w.startsWith("relay_variant:"))).toEqual([
        "relay_variant: removed, its value is ignored (the SSE relay has one transport, Bun's direct stream); delete it from the configuration",
      ]);
      expect("relay_variant" in c.document).toBe(false);
    }
    expect(buildConfig({}).warnings.some((w) => w.includes("relay_variant"))).toBe(false);
    // Only the removed key is forgiven: a misspelt one still fails.
    expect(issuesOf(() => buildConfig({ relay_variants: "direct" }))).toContain("relay_variants: unknown key");
  });

  test("cross-field checks: duplicate ids, alias shadowing a model, unknown fallback", () => {
    const issues = issuesOf(() =>
      buildConfig({
        models: [{ name: "a", aliases: ["b"], fallback: ["zzz"] }, { name: "b" }],
        endpoints: [
          { id: "e1", url: "http://h:1" },
          { id: "e1", url: "http://h:2" },
        ],
      }),
    );
    expect(issues).toContain("endpoints[1].id: duplicate endpoint id 'e1' (also endpoints[0])");
    expect(issues).toContain("models[0].aliases[0]: alias 'b' shadows the model of that name");
    expect(issues).toContain("models[0].fallback[0]: unknown model 'zzz' (expected a name under models)");
  });

  test("LLMGW_* environment overrides, nested with a double underscore, typed as YAML scalars", () => {
    const c = buildConfig(
      { health: { poll_interval_ms: 100 } },
      { LLMGW_LISTEN: "127.0.0.1:1234", LLMGW_HEALTH__POLL_INTERVAL_MS: "500", LLMGW_CONFIG: "ignored.yaml", LLMGW_AGENT_TOKEN: "not a config key" },
    );
    expect(c.listen).toEqual({ host: "127.0.0.1", port: 1234 });
    expect(c.health.pollIntervalMs).toBe(500);
    expect(applyEnvOverrides({}, { LLMGW_RETRY__MAX_ATTEMPTS: "2" })).toEqual({ retry: { max_attempts: 2 } });
  });

  test("a bad environment value is reported like a bad file value", () => {
    const issues = issuesOf(() => buildConfig({}, { LLMGW_HEALTH__POLL_INTERVAL_MS: "soon" }));
    expect(issues[0]).toStartWith("health.poll_interval_ms:");
  });

  test("YAML syntax errors give a line and column", () => {
    const issues = issuesOf(() => parseConfigText("listen: [\n", "bad.yaml"));
    expect(issues[0]).toMatch(/^line \d+, column \d+: /);
  });
});

test("auth.enabled: true with no auth.keys is live keys only: accepted, with a warning that says so", () => {
  const c = buildConfig({ auth: { enabled: true } });
  expect(c.auth).toEqual({ enabled: true, keys: [] });
  expect(c.warnings.some((w) => w.startsWith("auth.enabled: true with no auth.keys: only live keys"))).toBe(true);
  expect(buildConfig({}).warnings.some((w) => w.includes("only live keys"))).toBe(false);
});
