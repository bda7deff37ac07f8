/**
 * The keys API (src/admin/keys-routes.ts) in process, on an in-memory sqlite
 * key store: a created key's secret is shown once and works at once; names
 * with control, bidi or line-separator characters, unknown fields, wrong
 * types, bodies over the limit (declared or streamed), broken JSON, unknown
 * ids and bands get clear OpenAI-shaped errors naming the field, and change
 * nothing; a config key is listed but cannot be changed.
 */
import { Database } from "bun:sqlite";
import { beforeEach, describe, expect, test } from "bun:test";
import { keysRoutes } from "../../src/admin/keys-routes.ts";
import type { Config } from "../../src/config/types.ts";
import { Authenticator, type Principal } from "../../src/gateway/api-keys.ts";
import { SqliteKeyStore } from "../../src/keys/key-store.ts";
import { LiveKeys } from "../../src/keys/live-keys.ts";
import { setLogLevel } from "../../src/shared/logger.ts";

const admission = {
  bands: [{ name: "interactive" }, { name: "batch" }],
  defaultBand: 0,
} as unknown as Config["admission"];
const CONFIG_SHA = "b".repeat(64);

let app: ReturnType<typeof keysRoutes>;
let auth: Authenticator;
let store: SqliteKeyStore;

function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const init: RequestInit = { method, headers: { "content-type": "application/json", ...headers } };
  if (body !== undefined) init.body = typeof body === "string" || body instanceof ReadableStream ? (body as RequestInit["body"]) : JSON.stringify(body);
  return app.handle(new Request(`http://127.0.0.1/admin/v1/keys${path}`, init));
}

async function error(res: Response): Promise<{ status: number; code: string; param: string | null; message: string }> {
  const b = (await res.json()) as { error: { code: string; param: string | null; message: string } };
  return { status: res.status, ...b.error };
}

function bearer(secret: string): Headers {
  return new Headers({ authorization: `Bearer ${secret}` });
}

beforeEach(async () => {
  setLogLevel("silent");
  store = new SqliteKeyStore(new Database(":memory:", { strict: true }));
  auth = new Authenticator({ enabled: true, keys: [{ sha256: CONFIG_SHA, tenant: "ops", maxBand: 0 }] }, admission);
  const live: LiveKeys<readonly Principal[]> = new LiveKeys({
    store,
    ladder: (tenant, band, grant) => auth.liveLadder(tenant, band, grant),
    metrics: { used() {} },
  });
  auth.attachLiveKeys(live);
  await live.refresh();
  app = keysRoutes({ auth, liveKeys: live });
});

describe("keys API", () => {
  test("create: the secret once, only its digest stored; it authenticates at once; list and get never show it", async () => {
    const res = await call("POST", "", { name: "ci", tenant: "team-a", max_band: "batch", tokens_per_minute: 1000, models: ["m"] });
    expect(res.status).toBe(201);
    const key = (await res.json()) as { id: string; secret: string; prefix: string };
    expect(key.secret).toMatch(/^llmgw-[A-Za-z0-9_-]{32}$/);
    expect(key.secret.startsWith(key.prefix)).toBe(true);
    const stored = JSON.stringify(await store.list());
    expect(stored).not.toContain(key.secret);
    expect(stored).toContain(new Bun.CryptoHasher("sha256").update(key.secret).digest("hex"));
    const p = auth.authenticate(bearer(key.secret));
    expect(p).toMatchObject({ tenant: "team-a", bandName: "batch" });
    expect(p.key?.id).toBe(key.id);
    expect([...(p.key?.models ?? [])]).toEqual(["m"]);
    for (const text of [await (await call("GET", "")).text(), await (await call("GET", `/${key.id}`)).text()]) {
      expect(text).toContain(key.id);
      expect(text).not.toContain(key.secret);
    }
  });

  test("names with control, bidi-override or line-separator characters are refused naming the field; nothing is stored", async () => {
    for (const name of ["a\u0000b", "evil\u202Egnp.exe", "two\nlines", "tab\there", "", " padded", "x".repeat(101)]) {
      const e = await error(await call("POST", "", { name, tenant: "t" }));
      expect(e).toMatchObject({ status: 422, code: "VALIDATION_FAILED", param: "name" });
    }
    // Printable text of any script is a name.
    expect((await call("POST", "", { name: "équipe données — 東京 🚀", tenant: "t" })).status).toBe(201);
    expect((await store.list()).length).toBe(1);
  });

  test("unknown fields and wrong types are refused naming the field (a misspelt limit must not mean unlimited)", async () => {
    const unknown = await error(await call("POST", "", { name: "a", tenant: "t", request_per_minute: 5 }));
    expect(unknown).toMatchObject({ status: 422, code: "VALIDATION_FAILED", param: "request_per_minute" });
    expect(unknown.message).toContain("unknown field 'request_per_minute'");
    expect(await error(await call("POST", "", { name: "a", tenant: "t", requests_per_minute: "5" }))).toMatchObject({
      status: 422,
      param: "requests_per_minute",
    });
    expect(await error(await call("POST", "", { name: "a", tenant: "t", requests_per_minute: 0 }))).toMatchObject({
      status: 422,
      param: "requests_per_minute",
    });
    expect(await error(await call("POST", "", { name: "a", tenant: "no spaces/or slashes" }))).toMatchObject({ status: 422, param: "tenant" });
    expect(await error(await call("POST", "", { name: "a", tenant: "t", models: ["bad\u0007model"] }))).toMatchObject({
      status: 422,
      code: "VALIDATION_FAILED",
    });
    expect(await error(await call("POST", "", { name: "a", tenant: "t", max_band: "platinum" }))).toMatchObject({ status: 422, param: "max_band" });
    expect(await error(await call("POST", "", [1, 2]))).toMatchObject({ status: 422, code: "VALIDATION_FAILED" });
    expect(await error(await call("POST", "", "{not json"))).toMatchObject({ status: 400, code: "INVALID_JSON" });
    expect(await store.list()).toEqual([]);
  });

  test("a body over 64 KiB is a 413, declared or streamed without a length", async () => {
    const huge = JSON.stringify({ name: "a", tenant: "t", models: Array.from({ length: 20_000 }, (_, i) => `model-${i}`) });
    expect(await error(await call("POST", "", huge))).toMatchObject({ status: 413, code: "BODY_TOO_LARGE" });
    const chunk = new TextEncoder().encode(" ".repeat(16 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        // Bounded: the reader must stop it long before this ends.
        if (sent++ < 1_000) c.enqueue(chunk);
        else c.close();
      },
    });
    expect(await error(await call("POST", "", stream))).toMatchObject({ status: 413, code: "BODY_TOO_LARGE" });
    expect(sent).toBeLessThan(20);
    expect(await store.list()).toEqual([]);
  });

  test("unknown ids are 404; a config key is listed but cannot be changed, rotated, revoked or counted (409 naming the file)", async () => {
    expect(await error(await call("POST", "/key_ffffffffffffffff/revoke"))).toMatchObject({ status: 404, code: "NOT_FOUND" });
    expect(await error(await call("GET", "/..%2F..%2Fetc"))).toMatchObject({ status: 404 });
    const listed = (await (await call("GET", "")).json()) as { keys: { id: string; source: string; tenant: string }[] };
    const config = listed.keys.find((k) => k.source === "config")!;
    expect(config).toMatchObject({ id: `yaml_${CONFIG_SHA.slice(0, 16)}`, tenant: "ops" });
    for (const [method, path, body] of [
      ["POST", `/${config.id}/revoke`, undefined],
      ["POST", `/${config.id}/rotate`, {}],
      ["PATCH", `/${config.id}`, { requests_per_minute: 5 }],
      ["GET", `/${config.id}/usage`, undefined],
    ] as const) {
      const e = await error(await call(method, path, body));
      expect(e).toMatchObject({ status: 409, code: "CONFLICT" });
      expect(e.message).toContain("auth.keys in the config file");
    }
  });

  test("rotate without grace stops the old secret at once; revoke stops the key; a revoked key cannot be rotated", async () => {
    const key = (await (await call("POST", "", { name: "r", tenant: "t" })).json()) as { id: string; secret: string };
    const rotated = (await (await call("POST", `/${key.id}/rotate`)).json()) as { secret: string; grace_until_ms: number | null };
    expect(rotated.grace_until_ms).toBeNull();
    expect(() => auth.authenticate(bearer(key.secret))).toThrow(/Incorrect API key/);
    expect(auth.authenticate(bearer(rotated.secret)).tenant).toBe("t");
    const withGrace = (await (await call("POST", `/${key.id}/rotate`, { grace_s: 60 })).json()) as { secret: string; grace_until_ms: number };
    expect(withGrace.grace_until_ms).toBeGreaterThan(Date.now());
    expect(auth.authenticate(bearer(rotated.secret)).tenant).toBe("t");
    expect(auth.authenticate(bearer(withGrace.secret)).tenant).toBe("t");
    expect(await error(await call("POST", `/${key.id}/rotate`, { grace_s: -1 }))).toMatchObject({ status: 422, param: "grace_s" });
    expect((await call("POST", `/${key.id}/revoke`)).status).toBe(200);
    expect(() => auth.authenticate(bearer(withGrace.secret))).toThrow(/Incorrect API key/);
    expect(() => auth.authenticate(bearer(rotated.secret))).toThrow(/Incorrect API key/);
    expect(await error(await call("POST", `/${key.id}/rotate`))).toMatchObject({ status: 409, code: "CONFLICT" });
    // Revoking again changes nothing and says so with the same answer.
    expect(((await (await call("POST", `/${key.id}/revoke`)).json()) as { state: string }).state).toBe("revoked");
  });
});
