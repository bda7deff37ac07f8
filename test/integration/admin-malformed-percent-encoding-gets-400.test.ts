/**
 * Scenario: a request to a gateway's admin listener (running the fleet
 * manager) whose path has a malformed percent-escape. It is a 400
 * INVALID_REQUEST in the admin API's error shape, on a read as on a write,
 * where the management API used to read the escape as U+FFFD and answer
 * "no node '\ufffd'"; the door's Host check still comes first. Well-formed
 * paths are answered as before.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Gateway } from "../helpers/cluster.ts";
import { ADMIN_TOKEN } from "../helpers/fleet.ts";
import { fleetGatewayConfig, startFleetGateway } from "../helpers/fleet-gateway.ts";
import { stopAll } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "admin-escapes-"));
let gw: Gateway;

beforeAll(async () => {
  gw = await startFleetGateway(fleetGatewayConfig(join(tmp, "data"), [], {}));
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

async function call(
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: { error?: { code: string; type: string; message: string } } }> {
  const write = method !== "GET";
  const res = await fetch(`${gw.admin}${path}`, {
    method,
    headers: { ...(write ? { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" } : {}), ...headers },
    ...(write && method !== "DELETE" ? { body: "{}" } : {}),
  });
  return { status: res.status, body: (await res.json()) as never };
}

describe("the admin listener and a malformed percent-encoding", () => {
  test("is a 400 INVALID_REQUEST on every route, read or write", async () => {
    const cases: [string, string][] = [
      ["GET", "/admin/v1/fleet/nodes/%zz"],
      ["GET", "/admin/v1/fleet/nodes/%E0%A4%A"],
      ["GET", "/admin/v1/fleet/nodes/%E0%A4%A/drain"],
      ["POST", "/admin/v1/fleet/nodes/%zz/cordon"],
      ["POST", "/admin/v1/fleet/nodes/%C0%AF/drain"],
      ["PATCH", "/admin/v1/fleet/models/%zz"],
      ["DELETE", "/admin/v1/fleet/models/%E0%A4%A"],
      ["GET", "/admin/v1/fleet/models/%/placement"],
      ["GET", "/admin/v1/%zz"],
    ];
    for (const [method, path] of cases) {
      const r = await call(method, path);
      expect([method, path, r.status]).toEqual([method, path, 400]);
      expect(r.body.error).toMatchObject({ code: "INVALID_REQUEST", type: "invalid_request_error" });
      expect(r.body.error!.message).toContain("malformed percent-encoding");
    }
  });

  test("the Host check comes first, and well-formed paths are answered as before", async () => {
    expect((await call("GET", "/admin/v1/fleet/nodes/%zz", { host: "evil.example" })).status).toBe(421);
    expect((await call("GET", "/admin/v1/fleet/nodes")).status).toBe(200);
    const missing = await call("GET", "/admin/v1/fleet/nodes/no%2Dsuch");
    expect(missing.status).toBe(404);
    expect(missing.body.error!.message).toContain("no node 'no-such'");
  });
});
