/**
 * Live API keys shared by two `llmgw serve` processes through a real
 * redis-server: a key created through one gateway's admin API authenticates
 * on the other within a couple of seconds; a revoke on one is a 401 on the
 * other; a rotation's grace period keeps the old secret working until it
 * ends; a model outside the key's allow-list is a 403 MODEL_NOT_ALLOWED; a
 * config key works beside the live ones and cannot be revoked through the
 * API; usage is counted across both gateways and exported per key; and
 * `llmgw ctl keys` drives the same API.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { counterValue, startSim } from "../helpers/cluster.ts";
import { type ClusterGateway, startGatewayCluster } from "../helpers/gateway-cluster.ts";
import { REPO_ROOT, stopAll, waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const ADMIN_TOKEN = "admin-token-0123456789";
const CONFIG_KEY = "config-key-0123456789";

interface KeyAnswer {
  id: string;
  secret: string;
  prefix: string;
  state: string;
  source: string;
  grace_until_ms: number | null;
}

function admin(gw: ClusterGateway, method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  return fetch(`${gw.admin}/admin/v1/keys${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

function chat(gw: ClusterGateway, key: string, model = "m"): Promise<Response> {
  return fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 4 }),
  });
}

/** The status `key` gets on `gw` once it settles to `want` (bounded: the change must arrive within `timeoutMs`); returns how long it took. */
async function statusBecomes(gw: ClusterGateway, key: string, want: number, timeoutMs = 5_000): Promise<number> {
  const started = performance.now();
  await waitUntil(
    async () => {
      const r = await chat(gw, key);
      await r.arrayBuffer();
      return r.status === want ? true : undefined;
    },
    { timeoutMs, intervalMs: 50, what: `HTTP ${want} for the key on ${gw.name}` },
  );
  return performance.now() - started;
}

function ctl(gw: ClusterGateway, args: string[]): { code: number; out: string; err: string } {
  const r = Bun.spawnSync([join(REPO_ROOT, "bin", "llmgw"), "ctl", "--gateway", gw.admin, "--token", ADMIN_TOKEN, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, out: r.stdout.toString(), err: r.stderr.toString() };
}

describeWithRedis("live keys across two gateways on Redis", () => {
  let one: ClusterGateway;
  let two: ClusterGateway;

  beforeAll(async () => {
    const redis = await startRedisServer();
    const sims = await Promise.all(["m", "other"].map((model) => startSim(["--model", model, "--itl-ms", "1", "--output-len", "3"])));
    [one, two] = (await startGatewayCluster(
      redis,
      2,
      {
        log_level: "warn",
        admin: { token: ADMIN_TOKEN },
        endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api, models: [i === 0 ? "m" : "other"] })),
        auth: { keys: [{ key: CONFIG_KEY, tenant: "ops" }] },
      },
      { readyEndpoints: 2 },
    )) as [ClusterGateway, ClusterGateway];
  });

  afterAll(async () => {
    await stopAll();
    await stopRedisServers();
  });

  test("a key created on one gateway works on the other within seconds; its secret is never listed", async () => {
    const created = await admin(one, "POST", "", { name: "team a — ci", tenant: "team-a" });
    expect(created.status).toBe(201);
    const key = (await created.json()) as KeyAnswer;
    expect(key.secret.startsWith(key.prefix)).toBe(true);
    expect(key.source).toBe("live");
    // The gateway that stored it uses it at once; the other once it polled the store's version.
    expect((await chat(one, key.secret)).status).toBe(200);
    const took = await statusBecomes(two, key.secret, 200);
    expect(took).toBeLessThan(5_000);
    const listed = await (await admin(two, "GET", "")).text();
    expect(listed).toContain(key.id);
    expect(listed).not.toContain(key.secret);
    // The config key works beside the live ones.
    expect((await chat(two, CONFIG_KEY)).status).toBe(200);
    // The admin API's OpenAPI document describes every keys route.
    const paths = Object.keys(((await (await fetch(`${one.admin}/openapi/json`)).json()) as { paths: Record<string, unknown> }).paths);
    for (const p of ["/admin/v1/keys", "/admin/v1/keys/{id}", "/admin/v1/keys/{id}/rotate", "/admin/v1/keys/{id}/revoke", "/admin/v1/keys/{id}/usage"])
      expect(paths).toContain(p);
  });

  test("revoked on one gateway → 401 on the other; a config key cannot be revoked through the API", async () => {
    const key = (await (await admin(one, "POST", "", { name: "short-lived", tenant: "team-b" })).json()) as KeyAnswer;
    await statusBecomes(two, key.secret, 200);
    const revoked = await admin(one, "POST", `/${key.id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(((await revoked.json()) as KeyAnswer).state).toBe("revoked");
    expect((await chat(one, key.secret)).status).toBe(401);
    await statusBecomes(two, key.secret, 401);

    const listed = (await (await admin(one, "GET", "")).json()) as { keys: KeyAnswer[] };
    const configKey = listed.keys.find((k) => k.source === "config")!;
    const refused = await admin(two, "POST", `/${configKey.id}/revoke`);
    expect(refused.status).toBe(409);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("CONFLICT");
    expect(body.error.message).toContain("auth.keys in the config file");
    expect((await chat(one, CONFIG_KEY)).status).toBe(200);
  });

  test("rotate with a grace period: old and new secrets both work, then only the new one", async () => {
    const key = (await (await admin(one, "POST", "", { name: "rotating", tenant: "team-c" })).json()) as KeyAnswer;
    await statusBecomes(two, key.secret, 200);
    const graceS = 3;
    const rotated = (await (await admin(two, "POST", `/${key.id}/rotate`, { grace_s: graceS })).json()) as KeyAnswer;
    expect(rotated.secret).not.toBe(key.secret);
    expect(rotated.grace_until_ms).not.toBeNull();
    await statusBecomes(one, rotated.secret, 200);
    // Still inside the grace period on both (checked right after the new one arrived, well before it ends).
    if (Date.now() < rotated.grace_until_ms! - 1_000) expect((await chat(one, key.secret)).status).toBe(200);
    await statusBecomes(one, key.secret, 401, graceS * 1000 + 5_000);
    await statusBecomes(two, key.secret, 401, 5_000);
    expect((await chat(two, rotated.secret)).status).toBe(200);

    // Without a grace period the old secret stops at once.
    const again = (await (await admin(one, "POST", `/${key.id}/rotate`)).json()) as KeyAnswer;
    expect((await chat(one, rotated.secret)).status).toBe(401);
    await statusBecomes(two, again.secret, 200);
  });

  test("a model outside the key's allow-list is a 403 MODEL_NOT_ALLOWED in OpenAI's shape", async () => {
    const key = (await (await admin(one, "POST", "", { name: "only m", tenant: "team-d", models: ["m"] })).json()) as KeyAnswer;
    await statusBecomes(two, key.secret, 200);
    const refused = await chat(two, key.secret, "other");
    expect(refused.status).toBe(403);
    const body = (await refused.json()) as { error: { code: string; param: string; type: string } };
    expect(body.error).toMatchObject({ code: "MODEL_NOT_ALLOWED", param: "model", type: "invalid_request_error" });
    // /v1/models lists only what the key may ask for.
    const models = async (gw: ClusterGateway) =>
      ((await (await fetch(`${gw.api}/v1/models`, { headers: { authorization: `Bearer ${key.secret}` } })).json()) as { data: { id: string }[] }).data.map(
        (m) => m.id,
      );
    expect(await models(two)).toEqual(["m"]);
    // Widened on one gateway: the other follows.
    expect((await admin(one, "PATCH", `/${key.id}`, { models: null })).status).toBe(200);
    await waitUntil(async () => ((await chat(two, key.secret, "other")).status === 200 ? true : undefined), { timeoutMs: 5_000, intervalMs: 50 });
    expect((await models(two)).sort()).toEqual(["m", "other"]);
  });

  test("usage is counted across both gateways, read through either, and exported per key", async () => {
    const key = (await (await admin(one, "POST", "", { name: "metered", tenant: "team-e" })).json()) as KeyAnswer;
    await statusBecomes(two, key.secret, 200); // one request on two
    for (let i = 0; i < 3; i++) expect((await chat(one, key.secret)).status).toBe(200);
    const usage = await waitUntil(
      async () => {
        const u = (await (await admin(two, "GET", `/${key.id}/usage`)).json()) as { requests: number; tokens_in: number; tokens_out: number };
        return u.requests >= 4 ? u : undefined;
      },
      { timeoutMs: 5_000, intervalMs: 100, what: "usage from both gateways" },
    );
    expect(usage.requests).toBe(4);
    expect(usage.tokens_in).toBeGreaterThan(0);
    expect(usage.tokens_out).toBeGreaterThan(0);
    expect(counterValue(await one.metrics(), "llmgw_key_requests_total", { key: key.id })).toBe(3);
    expect(counterValue(await one.metrics(), "llmgw_key_tokens_total", { key: key.id, direction: "out" })).toBeGreaterThan(0);
  });

  test("llmgw ctl keys: create shows the secret once, list and usage never do; revoke and a config key's refusal", async () => {
    const created = ctl(one, ["--json", "keys", "create", "--name", "from ctl", "--tenant", "team-f", "--rpm", "100", "--models", "m"]);
    expect(created.code).toBe(0);
    const key = JSON.parse(created.out) as KeyAnswer & { requests_per_minute: number; models: string[] };
    expect(key).toMatchObject({ requests_per_minute: 100, models: ["m"] });
    await statusBecomes(two, key.secret, 200);
    const list = ctl(two, ["keys", "list"]);
    expect(list.code).toBe(0);
    expect(list.out).toContain(key.id);
    expect(list.out).toContain(key.prefix);
    expect(list.out).not.toContain(key.secret);
    const usage = ctl(two, ["keys", "usage", key.id]);
    expect(usage.code).toBe(0);
    expect(usage.out).toContain("REQUESTS");
    expect(ctl(two, ["keys", "revoke", key.id]).code).toBe(0);
    await statusBecomes(one, key.secret, 401);
    const configId = ((await (await admin(one, "GET", "")).json()) as { keys: KeyAnswer[] }).keys.find((k) => k.source === "config")!.id;
    const refused = ctl(one, ["keys", "revoke", configId]);
    expect(refused.code).toBe(7);
    expect(refused.err).toContain("config file");
  });
});
