/** The `admin` block: the admin token (falling back to fleet.admin_token) and the Host names the admin listener answers to. */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import { issuesOf } from "../helpers/config-issues.ts";

const TOKEN = "admin-block-token-0123456789";

describe("admin config", () => {
  test("defaults: no token (every change refused), no extra host names", () => {
    expect(buildConfig({}).admin).toEqual({ token: undefined, allowedHosts: [] });
  });

  test("the token from admin.token, from fleet.admin_token, or from the environment; host names lower-cased", () => {
    expect(buildConfig({ admin: { token: TOKEN, allowed_hosts: ["GW1.Internal", "10.0.0.5", "fe80::1"] } }).admin).toEqual({
      token: TOKEN,
      allowedHosts: ["gw1.internal", "10.0.0.5", "fe80::1"],
    });
    expect(buildConfig({ fleet: { admin_token: TOKEN } }).admin.token).toBe(TOKEN);
    expect(buildConfig({ admin: { token: TOKEN }, fleet: { admin_token: TOKEN } }).admin.token).toBe(TOKEN);
    expect(buildConfig({}, { LLMGW_ADMIN__TOKEN: TOKEN, LLMGW_ADMIN__ALLOWED_HOSTS: "[gw2.internal]" }).admin).toEqual({
      token: TOKEN,
      allowedHosts: ["gw2.internal"],
    });
  });

  test("errors name the key and what was expected", () => {
    expect(issuesOf(() => buildConfig({ admin: { token: "short" } }))).toEqual(["admin.token: expected at least 16 characters"]);
    expect(issuesOf(() => buildConfig({ admin: { token: TOKEN }, fleet: { admin_token: `${TOKEN}-other` } }))).toEqual([
      "admin.token: differs from fleet.admin_token; they are the same token (set one of them)",
    ]);
    for (const bad of ["http://gw1", "gw1:9090", "gw 1", "*.example.com", ""]) {
      expect(issuesOf(() => buildConfig({ admin: { allowed_hosts: [bad] } }))).toEqual([
        "admin.allowed_hosts[0]: expected a host name without port or scheme, e.g. gw1.internal or 10.0.0.5",
      ]);
    }
    expect(issuesOf(() => buildConfig({ admin: { tokn: TOKEN } }))[0]).toContain("admin");
  });
});
