/** endpoints[].api_key_env, api_key_file and headers: what is refused (hostile headers, missing keys) and what requests to the engine carry. */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig, ConfigError } from "../../src/config/load.ts";
import { maskSecrets } from "../../src/config/print-config.ts";

const endpoint = (extra: Record<string, unknown>) => ({ endpoints: [{ id: "e", url: "http://127.0.0.1:9", ...extra }] });

function issues(raw: unknown, env: Record<string, string> = {}): string[] {
  try {
    buildConfig(raw, env);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.issues];
    throw err;
  }
  return [];
}

describe("upstream credentials in the config", () => {
  test("api_key_env: the key becomes a bearer header beside the configured ones", () => {
    const c = buildConfig(endpoint({ api_key_env: "ENGINE_KEY", headers: { "X-Org": "acme" } }), { ENGINE_KEY: "  sk-1  " });
    expect(c.endpoints[0]!.upstreamHeaders).toEqual({ "X-Org": "acme", authorization: "Bearer sk-1" });
  });

  test("api_key_file: read once and trimmed; missing, empty or both named is an error naming the key, never the value", () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-keyfile-"));
    const file = join(dir, "key");
    writeFileSync(file, "sk-from-file\n");
    expect(buildConfig(endpoint({ api_key_file: file })).endpoints[0]!.upstreamHeaders).toEqual({ authorization: "Bearer sk-from-file" });
    expect(issues(endpoint({ api_key_file: join(dir, "absent") }))).toEqual([`endpoints[0].api_key_file: cannot read ${join(dir, "absent")} (ENOENT)`]);
    writeFileSync(join(dir, "empty"), " \n");
    expect(issues(endpoint({ api_key_file: join(dir, "empty") }))).toEqual([`endpoints[0].api_key_file: ${join(dir, "empty")} is empty`]);
    expect(issues(endpoint({ api_key_env: "K", api_key_file: file }), { K: "x" })).toEqual([
      "endpoints[0].api_key_env: give api_key_env or api_key_file, not both",
    ]);
    writeFileSync(join(dir, "two"), "sk-a\nsk-b\n");
    const two = issues(endpoint({ api_key_file: join(dir, "two") }));
    expect(two).toEqual(["endpoints[0].api_key_file: the key spans several lines or holds NUL"]);
  });

  test("an unset or empty variable is an error naming the variable", () => {
    expect(issues(endpoint({ api_key_env: "NOPE" }))).toEqual(["endpoints[0].api_key_env: environment variable NOPE is not set or empty"]);
    expect(issues(endpoint({ api_key_env: "EMPTY" }), { EMPTY: "" })).toEqual(["endpoints[0].api_key_env: environment variable EMPTY is not set or empty"]);
    expect(issues(endpoint({ api_key_env: "1BAD-NAME" }))[0]).toContain("endpoints[0].api_key_env: expected an environment variable name");
  });

  test("hostile headers are refused by name: CR/LF smuggling, non-token names, hop-by-hop and framing fields, a second credential", () => {
    const refused = (headers: Record<string, string>) => issues(endpoint({ headers }));
    expect(refused({ "X-Ok": "a\r\nX-Injected: 1" })).toEqual(["endpoints[0].headers.X-Ok: a header value must not contain CR, LF or NUL"]);
    expect(refused({ "X-Ok": "a\nb" })[0]).toContain("must not contain CR, LF or NUL");
    expect(refused({ "Bad Name": "v" })[0]).toContain('endpoints[0].headers["Bad Name"]: expected a header name');
    expect(refused({ "X-A:b": "v" })[0]).toContain("expected a header name");
    expect(refused({ "": "v" })[0]).toContain("expected a header name");
    for (const name of ["Connection", "transfer-encoding", "Host", "Content-Length", "Upgrade", "TE", "Proxy-Authorization", "Keep-Alive"])
      expect(refused({ [name]: "v" })).toEqual([`endpoints[0].headers.${name}: '${name}' is set by llmgw itself and cannot be configured`]);
    expect(refused({ Authorization: "Bearer x" })).toEqual(["endpoints[0].headers.Authorization: set the key with api_key_env or api_key_file, not a header"]);
    // The offending value is never echoed: it may be a secret.
    expect(refused({ "X-Ok": "secret-value\r\n" }).join("\n")).not.toContain("secret-value");
  });

  test("--print-config masks every header value; the variable's name stays", () => {
    const masked = maskSecrets({ endpoints: [{ id: "e", api_key_env: "ENGINE_KEY", headers: { "X-Api-Key": "s3cret" } }] });
    expect(masked).toEqual({ endpoints: [{ id: "e", api_key_env: "ENGINE_KEY", headers: { "X-Api-Key": "********" } }] });
  });
});
