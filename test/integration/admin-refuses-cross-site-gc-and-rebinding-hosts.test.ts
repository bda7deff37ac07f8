/**
 * Scenario: the attacks on the admin listener from a web page an operator
 * opens. A cross-site POST to /admin/v1/diagnostics/gc (no-cors fetch, a
 * plain form) used to run a full collection each time; a DNS-rebinding page
 * (its own name in Host) could read the management API. Now every write
 * needs the admin token, a write from another Origin or with a form body is
 * refused before it, every request under a Host the listener does not
 * answer for is 421, each refusal closes its connection and is counted by
 * reason, and what operators, ctl and agents send still works. A request
 * without Host (HTTP/1.0, no browser's) is answered, never with a 500.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { counterValue, type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { rawExchange } from "../helpers/raw-http.ts";

const ADMIN_TOKEN = "door-test-admin-token-0123456789";
const REGISTRATION_TOKEN = "door-test-registration-token-0123";
const tmp = mkdtempSync(join(tmpdir(), "admin-door-"));
let gw: Gateway;
let hostHeader: string;

beforeAll(async () => {
  const sim = await startSim(["--model", "m"]);
  gw = await startGateway(
    {
      data_dir: join(tmp, "data"),
      endpoints: [{ id: "sim", url: sim.api }],
      admin: { token: ADMIN_TOKEN, allowed_hosts: ["gw.internal"] },
      fleet: { registration_token: REGISTRATION_TOKEN },
    },
    1,
  );
  hostHeader = new URL(gw.admin).host;
}, 60_000);

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

async function refusals(): Promise<Record<string, number>> {
  const text = await gw.metrics();
  return Object.fromEntries(["host", "origin", "media_type", "token"].map((reason) => [reason, counterValue(text, "llmgw_admin_refusals_total", { reason })]));
}

function gc(headers: Record<string, string>, body?: string): Promise<Response> {
  return fetch(`${gw.admin}/admin/v1/diagnostics/gc`, { method: "POST", headers, body });
}

/** An OpenAI-shaped error body with this code. */
async function expectError(res: Response, status: number, code: string): Promise<void> {
  const body = (await res.json()) as { error: { code: string; message: string; type: string } };
  expect({ status: res.status, code: body.error.code }).toEqual({ status, code });
  expect(typeof body.error.message).toBe("string");
}

describe("the admin listener's door", () => {
  test("gc needs the admin token: none or a wrong one is 401; the right one runs it", async () => {
    await expectError(await gc({}), 401, "UNAUTHORIZED");
    await expectError(await gc({ authorization: "Bearer not-the-admin-token-at-all" }), 401, "UNAUTHORIZED");
    const ok = await gc({ authorization: `Bearer ${ADMIN_TOKEN}` });
    expect(ok.status).toBe(200);
    expect(Object.keys((await ok.json()) as object).sort()).toEqual(["after", "before"]);
  });

  test("a write from another origin is 403 even with the token; from the listener's own origin it passes", async () => {
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    for (const origin of ["http://attacker.example", "null", "http://127.0.0.1:1", `http://localhost:${new URL(gw.admin).port}`, "file://"]) {
      await expectError(await gc({ ...auth, origin }), 403, "CROSS_ORIGIN_REFUSED");
    }
    await expectError(await gc({ ...auth, "sec-fetch-site": "cross-site" }), 403, "CROSS_ORIGIN_REFUSED");
    await expectError(await gc({ ...auth, "sec-fetch-site": "same-site" }), 403, "CROSS_ORIGIN_REFUSED");
    expect((await gc({ ...auth, origin: `http://${hostHeader}`, "sec-fetch-site": "same-origin" })).status).toBe(200);
    // The operator's own name for the listener (a proxy in front) is its origin too.
    expect((await gc({ ...auth, origin: "https://gw.internal" })).status).toBe(200);
  });

  test("a form, multipart or text body is never taken: 415, token or not", async () => {
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    await expectError(await gc({ ...auth, "content-type": "application/x-www-form-urlencoded" }, "a=b"), 415, "UNSUPPORTED_MEDIA_TYPE");
    await expectError(await gc({ ...auth, "content-type": "multipart/form-data; boundary=x" }, "--x--"), 415, "UNSUPPORTED_MEDIA_TYPE");
    await expectError(await gc({ ...auth, "content-type": "text/plain" }, "{}"), 415, "UNSUPPORTED_MEDIA_TYPE");
    const cordon = await fetch(`${gw.admin}/admin/v1/fleet/register`, {
      method: "POST",
      headers: { authorization: `Bearer ${REGISTRATION_TOKEN}`, "content-type": "text/plain" },
      body: JSON.stringify({ node: "n1", url: "http://127.0.0.1:1", token: "t" }),
    });
    await expectError(cordon, 415, "UNSUPPORTED_MEDIA_TYPE");
    expect((await gc({ ...auth, "content-type": "application/json; charset=utf-8" }, "{}")).status).toBe(200);
  });

  test("an agent registers with its registration token alone (its own credential), not the admin token", async () => {
    const res = await fetch(`${gw.admin}/admin/v1/fleet/register`, {
      method: "POST",
      headers: { authorization: `Bearer ${REGISTRATION_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ node: "door-node", url: "http://127.0.0.1:1", token: "agent-token" }),
    });
    expect(res.status).toBe(200);
  });

  test("a Host the listener does not answer for is 421 on reads and writes; its own address, localhost and allowed names pass", async () => {
    const port = new URL(gw.admin).port;
    for (const path of ["/admin/v1/endpoints", "/admin/v1/fleet/nodes", "/dashboard", "/admin/v1/dashboard", "/metrics", "/openapi/json", "/healthz"]) {
      const r = await rawExchange(gw.admin, `GET ${path} HTTP/1.1\r\nHost: attacker.example:${port}\r\n\r\n`, { expect: 1 });
      expect({ path, status: r.responses[0]?.status }).toEqual({ path, status: 421 });
      expect(JSON.parse(r.responses[0]!.body).error.code).toBe("HOST_NOT_ALLOWED");
    }
    const write = await rawExchange(
      gw.admin,
      `POST /admin/v1/diagnostics/gc HTTP/1.1\r\nHost: attacker.example\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Length: 0\r\n\r\n`,
      { expect: 1 },
    );
    expect(write.responses[0]?.status).toBe(421);
    for (const host of [hostHeader, `localhost:${port}`, "gw.internal", `GW.Internal:${port}`, `[::1]:${port}`]) {
      const r = await rawExchange(gw.admin, `GET /admin/v1/endpoints HTTP/1.1\r\nHost: ${host}\r\n\r\n`, { expect: 1 });
      expect({ host, status: r.responses[0]?.status }).toEqual({ host, status: 200 });
    }
  });

  test("each refusal closes its connection", async () => {
    const refused = await rawExchange(gw.admin, `GET /admin/v1/endpoints HTTP/1.1\r\nHost: attacker.example\r\n\r\n`, { waitMs: 3_000 });
    expect(refused.responses[0]?.status).toBe(421);
    expect(refused.closedAfterMs).toBeLessThan(2_000);
    // A refused write that declared a large body is answered and closed at once, its body never awaited.
    const held = await rawExchange(
      gw.admin,
      `POST /admin/v1/diagnostics/gc HTTP/1.1\r\nHost: ${hostHeader}\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{`,
      { waitMs: 3_000 },
    );
    expect(held.responses[0]?.status).toBe(401);
    expect(held.closedAfterMs).toBeLessThan(2_000);
  });

  test("HTTP/1.0 without Host is answered (no browser sends it), an unknown path with a JSON 404, never a 500", async () => {
    const health = await rawExchange(gw.admin, "GET /healthz HTTP/1.0\r\n\r\n");
    expect(health.responses[0]?.status).toBe(200);
    const missing = await rawExchange(gw.admin, "GET /no/such/route HTTP/1.0\r\n\r\n");
    expect(missing.responses[0]?.status).toBe(404);
    expect(JSON.parse(missing.responses[0]!.body).error.code).toBe("NOT_FOUND");
    const write = await rawExchange(gw.admin, "POST /admin/v1/diagnostics/gc HTTP/1.0\r\n\r\n");
    expect(write.responses[0]?.status).toBe(401);
  });

  test("refusals are counted by reason", async () => {
    const before = await refusals();
    await gc({});
    await gc({ authorization: `Bearer ${ADMIN_TOKEN}`, origin: "http://attacker.example" });
    await gc({ authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "text/plain" }, "x");
    await rawExchange(gw.admin, `GET /metrics HTTP/1.1\r\nHost: attacker.example\r\n\r\n`, { expect: 1 });
    const after = await refusals();
    expect({
      host: after.host! - before.host!,
      origin: after.origin! - before.origin!,
      media_type: after.media_type! - before.media_type!,
      token: after.token! - before.token!,
    }).toEqual({
      host: 1,
      origin: 1,
      media_type: 1,
      token: 1,
    });
  });
});
