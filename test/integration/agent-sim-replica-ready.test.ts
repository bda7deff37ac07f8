/**
 * Scenario: a real `llmgw agent` (fake nvidia-smi over the H100 capture, no
 * InfiniBand) guards its API with a bearer token, reports its inventory,
 * refuses invalid specs, and launches a real sim-engine replica through
 * PUT /v1/replicas/{id} that reaches Ready only once the sim-engine's
 * --startup-ms has passed (observed through GET /v1/state: Loading first).
 * It publishes vLLM's KV-cache events on ports the agent allocated and
 * reports with the replica. The same PUT again changes nothing; DELETE
 * stops the engine.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isAlive } from "../../src/agent/proc-info.ts";
import { KvEventSubscriber } from "../../src/engines/kv-events/subscriber.ts";
import { capturedGpuRows } from "../fixtures/agent/captures.ts";
import { writeFakeNvidiaSmi } from "../fixtures/agent/fake-tools.ts";
import { sharedFixture } from "../helpers/fixtures.ts";
import { type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

const TOKEN = "agent-test-token";
const STARTUP_MS = 2_000;
const tmp = mkdtempSync(join(tmpdir(), "agent-api-"));
let agent: Started;

interface ReplicaView {
  id: string;
  state: string;
  pid: number | null;
  endpoint: string;
  restarts: number;
  kvEvents: { endpoint: string; replayEndpoint: string | null; topic: string } | null;
}

function call(path: string, init: RequestInit = {}, token: string | null = TOKEN): Promise<Response> {
  const headers = new Headers(init.headers);
  if (token !== null) headers.set("authorization", `Bearer ${token}`);
  return fetch(`${agent.url}${path}`, { ...init, headers });
}

async function put(id: string, spec: unknown): Promise<Response> {
  return call(`/v1/replicas/${id}`, { method: "PUT", body: JSON.stringify(spec), headers: { "content-type": "application/json" } });
}

beforeAll(async () => {
  const h100 = capturedGpuRows(sharedFixture("nvidia-smi-capture__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"), "load")[0]!;
  const nvidiaSmi = writeFakeNvidiaSmi(join(tmp, "bin"), { gpus: [h100, { ...h100, index: "1", uuid: "GPU-11111111-0000-0000-0000-000000000001" }], apps: [] });
  agent = await startLlmgw(
    [
      "agent",
      "--listen",
      "127.0.0.1:0",
      "--token",
      TOKEN,
      "--state-dir",
      join(tmp, "state"),
      "--nvidia-smi",
      nvidiaSmi,
      "--sysfs-root",
      join(tmp, "no-infiniband"),
      "--stop-grace-ms",
      "3000",
    ],
    { timeoutMs: 20_000 },
  );
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("llmgw agent API", () => {
  test("listens under the name 'agent'; a missing or wrong token is a 401 in OpenAI shape", async () => {
    expect(agent.urls.agent).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await call("/health", {}, null)).status).toBe(200);
    for (const token of [null, "wrong"]) {
      const res = await call("/v1/state", {}, token);
      expect(res.status).toBe(401);
      const body = (await res.json()) as { error: { code: string; type: string } };
      expect(body.error).toMatchObject({ code: "UNAUTHORIZED", type: "authentication_error" });
    }
  });

  test("inventory: two h100-80g GPUs from nvidia-smi, no fabric (single-node island)", async () => {
    const res = await call("/v1/inventory");
    expect(res.status).toBe(200);
    const inv = (await res.json()) as {
      gpus: { index: number; class: string; utilizationPct: number | null; computeCapability: string; health: { ok: boolean } }[];
      fabric: { island: string; adapters: unknown[] };
    };
    expect(inv.gpus.map((g) => [g.index, g.class, g.utilizationPct, g.computeCapability, g.health.ok])).toEqual([
      [0, "h100-80g", 100, "9.0", true],
      [1, "h100-80g", 100, "9.0", true],
    ]);
    expect(inv.fabric).toEqual({ adapters: [], island: "single-node" });
  });

  test("invalid specs are refused with 400 VALIDATION_FAILED naming the rule", async () => {
    const missing = await put("bad", { engine: "vllm", model: "m", gpus: [5] });
    expect(missing.status).toBe(400);
    const err = ((await missing.json()) as { error: { code: string; message: string; type: string } }).error;
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.type).toBe("invalid_request_error");
    expect(err.message).toStartWith("gpu-exists: GPU 5 does not exist");
    const arithmetic = await put("bad", { engine: "vllm", model: "m", gpus: [0], tensorParallel: 2 });
    expect(((await arithmetic.json()) as { error: { message: string } }).error.message).toStartWith("parallel-arithmetic");
    const shape = await put("bad", { engine: "vllm", model: "m", tp: 2 });
    expect(shape.status).toBe(400);
    expect((await call("/v1/replicas/bad")).status).toBe(404);
  });

  test("a sim-engine replica is Ready only after its startup time; the same PUT is a no-op; DELETE stops it", async () => {
    // --startup-answers split restated: the sim now holds requests while loading, as vLLM does, and this test watches /health answer first.
    const spec = { engine: "sim", model: "sim-llama", startupMs: STARTUP_MS, gpus: [0], extraArgs: ["--startup-answers", "split"] };
    const t0 = Date.now();
    const created = await put("r1", spec);
    expect(created.status).toBe(201);
    const seen: string[] = [];
    let readyAt = 0;
    let replica: ReplicaView | undefined;
    await waitUntil(
      async () => {
        const state = (await (await call("/v1/state")).json()) as { replicas: ReplicaView[] };
        replica = state.replicas.find((r) => r.id === "r1");
        if (replica && seen[seen.length - 1] !== replica.state) seen.push(replica.state);
        if (replica?.state === "Failed") throw new Error(`replica failed: ${JSON.stringify(replica)}`);
        if (replica?.state === "Ready") readyAt = Date.now();
        return replica?.state === "Ready";
      },
      { timeoutMs: 30_000, intervalMs: 100, what: "replica Ready" },
    );
    expect(readyAt - t0).toBeGreaterThanOrEqual(STARTUP_MS);
    console.error(`agent-sim: PUT → Ready ${readyAt - t0} ms (startup ${STARTUP_MS} ms), states seen: ${seen.join(" → ")}`);
    expect(seen).toContain("Loading"); // health answered before the model was listed
    expect(seen.indexOf("Loading")).toBeLessThan(seen.indexOf("Ready"));
    const models = (await (await fetch(`${replica!.endpoint}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toContain("sim-llama");

    // The engine publishes its KV-cache events where the replica's report says.
    const kv = replica!.kvEvents!;
    expect(kv.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(kv.replayEndpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(kv.topic).toBe("kv@r1@sim-llama");
    let stored = 0;
    const sub = new KvEventSubscriber(
      { endpoint: kv.endpoint, replayEndpoint: kv.replayEndpoint!, topic: kv.topic },
      { batch: (b) => (stored += b.events.filter((e) => e.type === "BlockStored").length), reset: () => {} },
    );
    try {
      await waitUntil(() => sub.stats().connected && sub.stats().replayRequests > 0, { what: "subscribed to the replica's events" });
      const done = await fetch(`${replica!.endpoint}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "sim-llama", prompt: "z".repeat(400), max_tokens: 1 }),
      });
      expect(done.status).toBe(200);
      await waitUntil(() => stored > 0, { what: "BlockStored from the replica" });
    } finally {
      sub.close();
    }

    const again = await put("r1", spec);
    expect(again.status).toBe(200);
    const body = (await again.json()) as { outcome: string; replica: ReplicaView };
    expect(body.outcome).toBe("unchanged");
    expect(body.replica).toMatchObject({ pid: replica!.pid, state: "Ready", restarts: 0 });

    const taken = await put("r2", { engine: "sim", model: "other", gpus: [0] });
    expect(taken.status).toBe(400);
    expect(((await taken.json()) as { error: { message: string } }).error.message).toBe("gpu-in-use: GPU 0 is already used by replica 'r1'");

    const deleted = await call("/v1/replicas/r1", { method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect(isAlive(replica!.pid!)).toBe(false);
    expect((await call("/v1/replicas/r1")).status).toBe(404);
  }, 60_000);
});
