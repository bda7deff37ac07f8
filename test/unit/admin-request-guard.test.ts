/** The admin listener's door as a pure function: which Host names pass, which writes are refused and why. */
import { describe, expect, test } from "bun:test";
import { adminRequestGuard, hostAllowed, hostNameOf } from "../../src/admin/request-guard.ts";

const TOKEN = "unit-admin-token-0123456789";

function req(method: string, headers: Record<string, string>, path = "/admin/v1/diagnostics/gc"): Request {
  return new Request(`http://127.0.0.1:9090${path}`, { method, headers });
}

async function verdict(res: Response | undefined): Promise<string> {
  if (res === undefined) return "pass";
  const body = (await res.json()) as { error: { code: string } };
  expect(res.headers.get("connection")).toBe("close");
  return `${res.status} ${body.error.code}`;
}

describe("Host names", () => {
  test("hostNameOf strips port, brackets, case and a trailing dot", () => {
    expect(hostNameOf("Example.COM:9090")).toBe("example.com");
    expect(hostNameOf("example.com.")).toBe("example.com");
    expect(hostNameOf("[::1]:9090")).toBe("::1");
    expect(hostNameOf("[::1]")).toBe("::1");
    expect(hostNameOf(":9090")).toBeNull();
    expect(hostNameOf("[]")).toBeNull();
  });

  test("a loopback listener answers for loopback names and its allow-list only", () => {
    const ok = hostAllowed({ allowedHosts: ["gw.internal"], listenHost: "127.0.0.1", machineName: "box1.lan" });
    for (const name of ["127.0.0.1", "127.0.0.2", "localhost", "::1", "gw.internal"]) expect({ name, ok: ok(name) }).toEqual({ name, ok: true });
    for (const name of ["attacker.example", "10.0.0.5", "box1", "box1.lan", "localhost.attacker.example", "127.0.0.1.attacker.example"])
      expect({ name, ok: ok(name) }).toEqual({ name, ok: false });
  });

  test("a wildcard listener also answers for any IP literal and the machine's name", () => {
    const ok = hostAllowed({ allowedHosts: [], listenHost: "0.0.0.0", machineName: "box1.lan" });
    for (const name of ["10.0.0.5", "fe80::1", "box1", "box1.lan", "localhost"]) expect({ name, ok: ok(name) }).toEqual({ name, ok: true });
    for (const name of ["attacker.example", "box2.lan"]) expect({ name, ok: ok(name) }).toEqual({ name, ok: false });
  });

  test("a listener on one address answers for that address, not for others", () => {
    const ok = hostAllowed({ allowedHosts: [], listenHost: "10.0.0.5", machineName: "box1" });
    expect([ok("10.0.0.5"), ok("10.0.0.6"), ok("box1")]).toEqual([true, false, false]);
  });
});

describe("the door", () => {
  const door = adminRequestGuard({
    token: TOKEN,
    allowedHosts: ["gw.internal"],
    listenHost: "127.0.0.1",
    ownCredentialPaths: ["/admin/v1/fleet/register"],
    machineName: "box1",
  });
  const auth = { authorization: `Bearer ${TOKEN}` };

  test("reads pass without a token under an allowed Host, and not under another", async () => {
    expect(await verdict(door(req("GET", { host: "127.0.0.1:9090" }, "/admin/v1/endpoints")))).toBe("pass");
    expect(await verdict(door(req("GET", { host: "attacker.example:9090" }, "/admin/v1/endpoints")))).toBe("421 HOST_NOT_ALLOWED");
  });

  test("writes: origin, then media type, then token", async () => {
    const host = { host: "127.0.0.1:9090" };
    expect(await verdict(door(req("POST", { ...host, origin: "http://attacker.example", "content-type": "text/plain" })))).toBe("403 CROSS_ORIGIN_REFUSED");
    expect(await verdict(door(req("POST", { ...host, "content-type": "application/x-www-form-urlencoded" })))).toBe("415 UNSUPPORTED_MEDIA_TYPE");
    expect(await verdict(door(req("POST", { ...host, "content-length": "3" })))).toBe("415 UNSUPPORTED_MEDIA_TYPE");
    expect(await verdict(door(req("POST", host)))).toBe("401 UNAUTHORIZED");
    expect(await verdict(door(req("POST", { ...host, authorization: "Bearer nope" })))).toBe("401 UNAUTHORIZED");
    expect(await verdict(door(req("DELETE", { ...host, ...auth }, "/admin/v1/fleet/models/m")))).toBe("pass");
    expect(await verdict(door(req("POST", { ...host, ...auth, origin: "http://127.0.0.1:9090", "content-type": "application/json" })))).toBe("pass");
    expect(await verdict(door(req("POST", { ...host, ...auth, origin: "http://127.0.0.1:9091" })))).toBe("403 CROSS_ORIGIN_REFUSED");
    expect(await verdict(door(req("POST", { host: "127.0.0.1", ...auth, origin: "http://127.0.0.1:80" })))).toBe("pass");
  });

  test("the registration path needs no admin token (the route checks the registration token), but the same origin and media rules", async () => {
    const host = { host: "127.0.0.1:9090", "content-type": "application/json" };
    expect(await verdict(door(req("POST", host, "/admin/v1/fleet/register")))).toBe("pass");
    expect(await verdict(door(req("POST", { ...host, origin: "http://attacker.example" }, "/admin/v1/fleet/register")))).toBe("403 CROSS_ORIGIN_REFUSED");
  });

  test("without a configured token every write is refused", async () => {
    const closed = adminRequestGuard({ token: undefined, allowedHosts: [], listenHost: "127.0.0.1", ownCredentialPaths: [] });
    expect(await verdict(closed(req("POST", { host: "127.0.0.1:9090", ...auth })))).toBe("401 UNAUTHORIZED");
  });

  test("an inert prefix (the management API of a gateway with no fleet) asks no token, but keeps the Host, origin and media rules", async () => {
    const noFleet = adminRequestGuard({
      token: undefined,
      allowedHosts: [],
      listenHost: "127.0.0.1",
      ownCredentialPaths: [],
      inertPrefixes: ["/admin/v1/fleet"],
    });
    const host = { host: "127.0.0.1:9090", "content-type": "application/json" };
    expect(await verdict(noFleet(req("PATCH", host, "/admin/v1/fleet/models/m")))).toBe("pass");
    expect(await verdict(noFleet(req("POST", host, "/admin/v1/fleet")))).toBe("pass");
    expect(await verdict(noFleet(req("POST", host, "/admin/v1/fleetX")))).toBe("401 UNAUTHORIZED");
    expect(await verdict(noFleet(req("POST", host, "/admin/v1/diagnostics/gc")))).toBe("401 UNAUTHORIZED");
    expect(await verdict(noFleet(req("PATCH", { ...host, origin: "http://attacker.example" }, "/admin/v1/fleet/models/m")))).toBe("403 CROSS_ORIGIN_REFUSED");
    expect(await verdict(noFleet(req("PATCH", { ...host, host: "attacker.example" }, "/admin/v1/fleet/models/m")))).toBe("421 HOST_NOT_ALLOWED");
  });

  test("each refusal is reported with its reason", () => {
    const seen: string[] = [];
    const counted = adminRequestGuard({ token: TOKEN, allowedHosts: [], listenHost: "127.0.0.1", ownCredentialPaths: [], onRefusal: (r) => seen.push(r) });
    counted(req("GET", { host: "evil" }));
    counted(req("POST", { host: "127.0.0.1", origin: "null" }));
    counted(req("POST", { host: "127.0.0.1", "content-type": "text/plain" }));
    counted(req("POST", { host: "127.0.0.1" }));
    expect(seen).toEqual(["host", "origin", "media_type", "token"]);
  });
});
