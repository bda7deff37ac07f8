/**
 * Scenario: a gateway process serves streams from sim-engines when its config
 * file is rewritten — an endpoint added and one removed, an alias added, an
 * API key added and one revoked, a tenant's quota changed — and SIGHUP is
 * sent. Every stream open across the reload finishes; the new alias and key
 * work, the revoked key gets 401, the quota is the new one, and the removed
 * endpoint gets no new request. Then `llmgw ctl reload` of an invalid file
 * keeps the running config and the metrics and the log say why; a change to
 * `listen` is refused by name.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { childEnv } from "../../src/shared/process-env.ts";
import { type Sim, startSim } from "../helpers/cluster.ts";
import { CLI, REPO_ROOT, type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

const ADMIN_TOKEN = "reload-admin-token-0123456789";
const KEEP = "sk-reload-kept-key";
const REVOKED = "sk-reload-revoked-key";
const ADDED = "sk-reload-added-key";
const STREAMS = 8;

const tmp = mkdtempSync(join(tmpdir(), "llmgw-reload-"));
const configPath = join(tmp, "llmgw.yaml");
let a: Sim;
let b: Sim;
let c: Sim;
let gw: Started & { api: string; admin: string };

function document(over: { endpoints: Sim[]; aliases: string[]; keys: [string, string][]; tenants: Record<string, unknown>[]; listen?: string }) {
  return {
    listen: over.listen ?? "127.0.0.1:0",
    admin_listen: "127.0.0.1:0",
    admin: { token: ADMIN_TOKEN },
    endpoints: over.endpoints.map((s, i) => ({ id: ["a", "b", "c"][[a, b, c].indexOf(s)] ?? `e${i}`, url: s.api, models: ["sim-model"] })),
    models: [{ name: "sim-model", aliases: over.aliases }],
    auth: { enabled: true, keys: over.keys.map(([key, tenant]) => ({ key, tenant })) },
    tenants: over.tenants,
  };
}

const before = () =>
  document({
    endpoints: [a, b],
    aliases: ["old-alias"],
    keys: [
      [KEEP, "kept"],
      [REVOKED, "revoked"],
    ],
    tenants: [{ name: "kept", requests_per_minute: 10_000 }],
  });

const after = (listen?: string) =>
  document({
    endpoints: [b, c],
    aliases: ["old-alias", "new-alias"],
    keys: [
      [KEEP, "kept"],
      [ADDED, "added"],
    ],
    // The added key's tenant may send one request a minute.
    tenants: [
      { name: "kept", requests_per_minute: 10_000 },
      { name: "added", requests_per_minute: 1 },
    ],
    ...(listen ? { listen } : {}),
  });

const writeConfig = (doc: unknown) => writeFileSync(configPath, typeof doc === "string" ? doc : toYaml(doc));

const chat = (model: string, key: string, stream = false) =>
  fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ model, stream, max_tokens: stream ? 60 : 2, messages: [{ role: "user", content: "hello" }] }),
  });

/** Requests an engine has finished, from its own /metrics. */
async function served(sim: Sim): Promise<number> {
  let n = 0;
  for (const line of (await sim.metrics()).split("\n")) if (line.startsWith("vllm:request_success_total")) n += Number(line.split(" ").pop());
  return n;
}

async function metric(name: string, labels = ""): Promise<number | undefined> {
  const text = await (await fetch(`${gw.admin}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

async function ctlReload(): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, CLI, "ctl", "--gateway", gw.admin, "--token", ADMIN_TOKEN, "reload"], {
    cwd: REPO_ROOT,
    env: childEnv({ NO_COLOR: "1" }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

beforeAll(async () => {
  // Streams of ~60 tokens at 25 ms a token: open for over a second, across the reload.
  const sim = () => startSim(["--model", "sim-model", "--itl-ms", "25", "--output-len", "60"]);
  [a, b, c] = await Promise.all([sim(), sim(), sim()]);
  writeConfig(before());
  const s = await startLlmgw(["serve", "--config", configPath], { waitFor: 2 });
  gw = Object.assign(s, { api: s.urls.api!, admin: s.urls.admin! });
  await waitUntil(async () => (await chat("sim-model", KEEP)).status === 200, { what: "the gateway serving", timeoutMs: 20_000 });
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("a config reload under streaming load", () => {
  test("SIGHUP applies endpoints, alias, keys and quota with no stream failed, and the removed endpoint takes no new request", async () => {
    expect((await chat("new-alias", KEEP)).status).toBe(404);
    expect((await chat("sim-model", ADDED)).status).toBe(401);
    expect((await chat("sim-model", REVOKED)).status).toBe(200);

    // Streams open on both endpoints before the reload, read to their end after it.
    const streams = await Promise.all(Array.from({ length: STREAMS }, () => chat("sim-model", KEEP, true)));
    expect(streams.map((r) => r.status)).toEqual(Array(STREAMS).fill(200));
    const bodies = streams.map((r) => r.text());
    const reloadsBefore = (gw.output().match(/configuration reloaded/g) ?? []).length;
    writeConfig(after());
    gw.proc.kill("SIGHUP");
    await waitUntil(() => (gw.output().match(/configuration reloaded/g) ?? []).length > reloadsBefore, { what: "the reload's log line" });
    const texts = await Promise.all(bodies);
    // Every stream ends with [DONE] and carries no error event: none was cut by the reload or the removal of its endpoint.
    const failed = texts.filter((t) => !t.trimEnd().endsWith("data: [DONE]") || t.includes('"error"'));
    expect(failed).toEqual([]);
    expect(gw.proc.exitCode).toBeNull();

    // The new alias and key work; the revoked key does not.
    expect((await chat("new-alias", KEEP)).status).toBe(200);
    expect((await chat("sim-model", REVOKED)).status).toBe(401);
    // The added tenant's quota is the new one: one request a minute.
    expect((await chat("sim-model", ADDED)).status).toBe(200);
    expect((await chat("sim-model", ADDED)).status).toBe(429);

    // The removed endpoint takes no new request; the added one takes some.
    const [aBefore, cBefore] = [await served(a), await served(c)];
    const more = await Promise.all(Array.from({ length: 12 }, () => chat("sim-model", KEEP)));
    expect(more.map((r) => r.status)).toEqual(Array(12).fill(200));
    expect(await served(a)).toBe(aBefore);
    expect(await served(c)).toBeGreaterThan(cBefore);
    const ids = ((await (await fetch(`${gw.admin}/admin/v1/endpoints`)).json()) as { endpoints: { id: string }[] }).endpoints.map((e) => e.id).sort();
    expect(ids).toEqual(["b", "c"]);
    expect(await metric("llmgw_config_reload_total", '{result="ok"}')).toBe(1);
    expect(await metric("llmgw_config_last_reload_success")).toBe(1);
  }, 120_000);

  test("the admin route is an admin write: no token, no reload", async () => {
    const res = await fetch(`${gw.admin}/admin/v1/reload`, { method: "POST" });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("UNAUTHORIZED");
    expect(await metric("llmgw_config_reload_total", '{result="ok"}')).toBe(1);
  });

  test("ctl reload of an invalid file keeps the running config; the metrics and the log say why", async () => {
    const stamp = (await metric("llmgw_config_last_reload_timestamp_seconds")) ?? 0;
    writeConfig({ ...after(), endpoints: [{ id: "broken", url: "not a url" }] });
    const r = await ctlReload();
    expect(r.code).toBe(7);
    expect(r.stderr).toContain("endpoints[0].url");
    // The log says why, naming the key.
    const logged = await waitUntil(
      () =>
        gw
          .output()
          .split("\n")
          .find((l) => l.includes("configuration reload failed, running configuration kept") && l.includes("endpoints[0].url")),
      { what: "the failed reload's log line" },
    );
    expect(logged).toContain('"level":50');
    expect(await metric("llmgw_config_reload_total", '{result="invalid"}')).toBe(1);
    expect(await metric("llmgw_config_last_reload_success")).toBe(0);
    expect((await metric("llmgw_config_last_reload_timestamp_seconds")) ?? 0).toBeGreaterThanOrEqual(stamp);
    // Still the config of the last good reload.
    expect((await chat("new-alias", KEEP)).status).toBe(200);
    expect((await chat("sim-model", REVOKED)).status).toBe(401);
  }, 60_000);

  test("a change to listen is refused by name, the rest of the file not applied either", async () => {
    writeConfig({ ...after("127.0.0.1:1"), models: [{ name: "sim-model", aliases: ["old-alias", "new-alias", "third-alias"] }] });
    const r = await ctlReload();
    expect(r.code).toBe(7);
    expect(r.stderr).toContain("cannot change while the gateway runs");
    expect(r.stderr).toMatch(/: listen\b/);
    // The admin route answers the same refusal in the error shape.
    const direct = await fetch(`${gw.admin}/admin/v1/reload`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(direct.status).toBe(409);
    const body = (await direct.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("CONFLICT");
    expect(body.error.message).toMatch(/: listen\b/);
    expect(await metric("llmgw_config_reload_total", '{result="refused"}')).toBe(2);
    expect(await metric("llmgw_config_last_reload_success")).toBe(0);
    expect((await chat("third-alias", KEEP)).status).toBe(404);

    // The file put right: ctl reload applies it and says what changed.
    writeConfig({ ...after(), models: [{ name: "sim-model", aliases: ["old-alias", "new-alias", "third-alias"] }] });
    const ok = await ctlReload();
    expect({ code: ok.code, out: ok.stdout.trim() }).toEqual({ code: 0, out: "configuration reloaded: models changed" });
    expect((await chat("third-alias", KEEP)).status).toBe(200);
    expect(await metric("llmgw_config_last_reload_success")).toBe(1);
  }, 60_000);
});
