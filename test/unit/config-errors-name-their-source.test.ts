/** A bad value is blamed on what set it (a flag, an LLMGW_* variable) with one message per key; the admin token has one short name; --print-config masks every secret. */
import { describe, expect, test } from "bun:test";
import { buildConfig, ConfigError, loadConfigFile } from "../../src/config/load.ts";
import { MASK, maskSecrets, maskUrlPassword } from "../../src/config/print-config.ts";
import { issuesOf } from "../helpers/config-issues.ts";

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("config errors name their source", () => {
  test("an LLMGW_* value is the variable's, a file value the file's", () => {
    const env = errorOf(() => buildConfig({ listen: "127.0.0.1:1" }, { LLMGW_RETRY__MAX_ATTEMPTS: "lots" }, "llmgw.yaml"));
    expect(env.message).toStartWith("invalid configuration (LLMGW_RETRY__MAX_ATTEMPTS):");
    expect(env.issues).toEqual(["retry.max_attempts: Invalid input: expected number, received string (set by LLMGW_RETRY__MAX_ATTEMPTS)"]);
    // One from the file and one from the environment: the file is the source, each issue says where it came from.
    const both = errorOf(() => buildConfig({ listen: 8080 }, { LLMGW_RETRY__MAX_ATTEMPTS: "lots" }, "llmgw.yaml"));
    expect(both.message).toStartWith("invalid configuration (llmgw.yaml):");
    expect(both.issues).toContain("retry.max_attempts: Invalid input: expected number, received string (set by LLMGW_RETRY__MAX_ATTEMPTS)");
    // Cross-field issues too, and never the value (it may be a token).
    const cross = errorOf(() => buildConfig({}, { LLMGW_FLEET__ADMIN_TOKEN: "short-secret" }));
    expect(cross.issues).toEqual(["fleet.admin_token: expected at least 16 characters (set by LLMGW_FLEET__ADMIN_TOKEN)"]);
    expect(cross.message).not.toContain("short-secret");
  });

  test("a flag's value is the flag's, an added endpoint its --upstream", () => {
    const err = errorOf(() =>
      loadConfigFile(
        undefined,
        (raw, origins) => {
          raw.endpoints = [{ id: "upstream-1", url: "nope" }];
          origins.set("endpoints[0]", "--upstream");
          raw.listen = "0.0.0.0:70000";
          origins.set("listen", "--listen");
        },
        {},
      ),
    );
    expect(err.message).toStartWith("invalid configuration (--listen, --upstream):");
    expect(err.issues).toEqual(["listen: expected a port of at most 65535 (set by --listen)", "endpoints[0].url: expected an http(s) URL (set by --upstream)"]);
  });

  test("a malformed listen: is one error", () => {
    expect(issuesOf(() => buildConfig({ listen: "abc" }))).toEqual(["listen: expected HOST:PORT, e.g. 127.0.0.1:8080, got 'abc'"]);
    expect(issuesOf(() => buildConfig({ admin_listen: "h:123456" }))).toEqual(["admin_listen: expected HOST:PORT, e.g. 127.0.0.1:8080, got 'h:123456'"]);
    expect(issuesOf(() => buildConfig({ metrics_listen: "h:65536" }))).toEqual(["metrics_listen: expected a port of at most 65535"]);
  });

  test("LLMGW_ADMIN_TOKEN is fleet.admin_token; the long form agrees with it or is an error", () => {
    expect(buildConfig({}, { LLMGW_ADMIN_TOKEN: "admin-token-0123456789" }).fleet.adminToken).toBe("admin-token-0123456789");
    expect(buildConfig({}, { LLMGW_ADMIN_TOKEN: "admin-token-0123456789", LLMGW_FLEET__ADMIN_TOKEN: "admin-token-0123456789" }).fleet.adminToken).toBe(
      "admin-token-0123456789",
    );
    expect(
      issuesOf(() => buildConfig({}, { LLMGW_ADMIN_TOKEN: "admin-token-0123456789", LLMGW_FLEET__ADMIN_TOKEN: "another-token-0123456789" }))[0],
    ).toStartWith("fleet.admin_token: LLMGW_ADMIN_TOKEN and LLMGW_FLEET__ADMIN_TOKEN are both set and differ");
  });

  test("the effective document: defaults and derived values filled in, max_open_streams left for the start to size", () => {
    const c = buildConfig({ auth: { keys: [{ key: "sk-12345678", tenant: "a" }] } });
    expect(c.document).toMatchObject({ listen: "0.0.0.0:8080", deadlines: { first_token_ms: 60_000 }, auth: { enabled: true } });
    expect(c.document.max_open_streams).toBeUndefined();
    expect(c.maxOpenStreams).toBeUndefined();
    expect(buildConfig({ max_open_streams: 10 }).maxOpenStreams).toBe(10);
  });
});

describe("--print-config masks secrets", () => {
  test("keys, tokens and URL passwords, wherever they are", () => {
    const masked = maskSecrets({
      auth: { keys: [{ key: "sk-1", key_sha256: "ab", tenant: "t" }] },
      nodes: [{ name: "n", url: "http://u:pw@h:1", token: "agent", token_env: "AGENT_TOKEN" }],
      fleet: { admin_token: "a", registration_token: "r", models: [] },
      state: { redis_url: "redis://:pw@h:6379/0", key_prefix: "llmgw:" },
    });
    expect(masked).toEqual({
      auth: { keys: [{ key: MASK, key_sha256: "ab", tenant: "t" }] },
      nodes: [{ name: "n", url: `http://u:${MASK}@h:1/`, token: MASK, token_env: "AGENT_TOKEN" }],
      fleet: { admin_token: MASK, registration_token: MASK, models: [] },
      state: { redis_url: `redis://:${MASK}@h:6379/0`, key_prefix: "llmgw:" },
    });
    expect(maskUrlPassword("redis://127.0.0.1:6379/0")).toBe("redis://127.0.0.1:6379/0");
    expect(maskUrlPassword("redis://onlyapassword@h:6379")).toBe(`redis://${MASK}@h:6379`);
  });
});
