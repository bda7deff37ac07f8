/**
 * Scenario: a sim-engine started with `--api-key`, as `vllm serve --api-key`,
 * fronted by llmgw. With `api_key_env` the gateway discovers the engine's
 * models, polls its metrics and serves chat (streaming and not) through it;
 * an endpoint without the key is never ready where readiness needs
 * /v1/models, and a request that reaches the engine is answered 502
 * UPSTREAM_UNAUTHORIZED (not the client's 401). The key and a secret
 * header value appear nowhere in the gateway's output or `--print-config`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { type Sim, startSim } from "../helpers/cluster.ts";
import { CLI, REPO_ROOT, type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

const KEY = "sk-engine-0d9f3b7c51e2a4";
const HEADER_SECRET = "tenant-secret-77aa19";
const KEY_VAR = "LLMGW_TEST_ENGINE_KEY";

let sim: Sim;
let keyed: Started & { api: string; admin: string };
let keyless: Started & { api: string; admin: string };
let keyedConfig: string;

interface EndpointView {
  id: string;
  ready: boolean;
  models: string[];
  metrics_age_s: number | null;
  running: number | null;
}

async function endpoints(admin: string): Promise<EndpointView[]> {
  return ((await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: EndpointView[] }).endpoints;
}

async function gateway(config: Record<string, unknown>, env: Record<string, string>): Promise<Started & { api: string; admin: string }> {
  const path = writeGatewayConfig(config);
  const s = await startLlmgw(["serve", "--config", path], { waitFor: 2, env: { LLMGW_LOG_LEVEL: "debug", ...env } });
  return Object.assign(s, { api: s.urls.api!, admin: s.urls.admin!, path });
}

const chat = (api: string, stream: boolean) =>
  fetch(`${api}/v1/chat/completions`, {
    method: "POST",
    // The client's own key for llmgw: never forwarded to the engine.
    headers: { "content-type": "application/json", authorization: "Bearer client-key-not-for-engines" },
    body: JSON.stringify({ model: "sim-model", stream, max_tokens: 4, messages: [{ role: "user", content: "hello" }] }),
  });

beforeAll(async () => {
  sim = await startSim(["--model", "sim-model", "--itl-ms", "2", "--api-key", KEY]);
  const keyFile = join(mkdtempSync(join(tmpdir(), "llmgw-key-")), "engine.key");
  writeFileSync(keyFile, `${KEY}\n`);
  const keyedDoc = {
    endpoints: [
      // Models discovered from /v1/models, which the engine guards.
      { id: "by-env", url: sim.api, api_key_env: KEY_VAR, headers: { "X-Tenant-Token": HEADER_SECRET } },
      { id: "by-file", url: sim.api, api_key_file: keyFile },
    ],
  };
  keyedConfig = writeGatewayConfig(keyedDoc);
  keyed = await gateway(keyedDoc, { [KEY_VAR]: KEY });
  keyless = await gateway(
    {
      endpoints: [
        { id: "no-key-listed", url: sim.api },
        { id: "no-key-static", url: sim.api, models: ["sim-model"], models_source: "static" },
      ],
    },
    {},
  );
});

afterAll(stopAll);

describe("a gateway fronting an engine that wants an API key", () => {
  test("the engine itself refuses /v1 without the key, as vLLM does, and leaves /health and /metrics open", async () => {
    const models = await fetch(`${sim.api}/v1/models`);
    expect(models.status).toBe(401);
    expect(await models.json()).toEqual({ error: "Unauthorized" });
    expect((await fetch(`${sim.api}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })).status).toBe(200);
    expect((await fetch(`${sim.api}/health`)).status).toBe(200);
    expect((await fetch(`${sim.api}/metrics`)).status).toBe(200);
  });

  test("with api_key_env or api_key_file: models discovered, metrics polled, both endpoints ready", async () => {
    const ready = await waitUntil(
      async () => {
        const eps = await endpoints(keyed.admin);
        return eps.length === 2 && eps.every((e) => e.ready && e.metrics_age_s !== null) ? eps : undefined;
      },
      { what: "both keyed endpoints ready with metrics", timeoutMs: 20_000 },
    );
    for (const e of ready) expect(e.models).toEqual(["sim-model"]);
    const list = (await (await fetch(`${keyed.api}/v1/models`)).json()) as { data: { id: string }[] };
    expect(list.data.map((m) => m.id)).toContain("sim-model");
  });

  test("chat, non-streaming and streaming, reaches the engine with its key", async () => {
    const plain = await chat(keyed.api, false);
    expect(plain.status).toBe(200);
    const body = (await plain.json()) as { choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(4);
    const streamed = await chat(keyed.api, true);
    expect(streamed.status).toBe(200);
    const text = await streamed.text();
    expect(text).toContain('"finish_reason":"length"');
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
  });

  test("without a key: a listed endpoint never becomes ready, and its poll error names the setting", async () => {
    await waitUntil(() => keyless.output().includes("no-key-listed") && keyless.output().includes("api_key_env"), {
      what: "a readiness line naming api_key_env",
      timeoutMs: 20_000,
    });
    const listed = (await endpoints(keyless.admin)).find((e) => e.id === "no-key-listed")!;
    expect(listed.ready).toBe(false);
    expect(keyless.output()).toMatch(/GET \/v1\/models: HTTP 401: the engine wants an API key/);
  });

  test("without a key: a request the engine refuses is 502 UPSTREAM_UNAUTHORIZED naming the endpoint, not the client's 401", async () => {
    await waitUntil(async () => (await endpoints(keyless.admin)).find((e) => e.id === "no-key-static")?.ready, {
      what: "the static endpoint ready on /health",
      timeoutMs: 20_000,
    });
    for (const stream of [false, true]) {
      const r = await chat(keyless.api, stream);
      expect(r.status).toBe(502);
      const e = ((await r.json()) as { error: { code: string; message: string; type: string } }).error;
      expect(e.code).toBe("UPSTREAM_UNAUTHORIZED");
      expect(e.type).toBe("server_error");
      expect(e.message).toContain("no-key-static");
      expect(e.message).toContain("api_key_env");
    }
  });

  test("the key and the secret header value appear in no log line and not in --print-config", async () => {
    // Everything above has run: discovery, polls, chats and their debug lines.
    for (const out of [keyed.output(), keyless.output(), sim.output()]) {
      expect(out).not.toContain(KEY);
      expect(out).not.toContain(HEADER_SECRET);
    }
    const proc = Bun.spawn([process.execPath, CLI, "serve", "--config", keyedConfig, "--print-config"], {
      cwd: REPO_ROOT,
      env: childEnv({ NO_COLOR: "1", [KEY_VAR]: KEY }),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(0);
    expect(stdout).toContain(`api_key_env: ${KEY_VAR}`);
    expect(stdout).toContain(`X-Tenant-Token: "********"`);
    expect(stdout + stderr).not.toContain(KEY);
    expect(stdout + stderr).not.toContain(HEADER_SECRET);
  });

  test("an unset key variable stops serve with an error naming the key and the variable, never a value", async () => {
    const proc = Bun.spawn([process.execPath, CLI, "serve", "--config", keyedConfig, "--check-config"], {
      cwd: REPO_ROOT,
      env: childEnv({ NO_COLOR: "1" }),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code).not.toBe(0);
    expect(stdout + stderr).toContain(`endpoints[0].api_key_env: environment variable ${KEY_VAR} is not set or empty`);
  });
});
