/**
 * Scenario: the real health worker (workers/health.ts), told which agents to
 * poll by message, polls a real `llmgw agent` and posts each poll back; the
 * list is replaced at run time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FromHealth, ToHealth } from "../../src/protocol/health-messages.ts";
import { EndpointTable, Signals } from "../../src/shared/endpoint-table.ts";
import { AGENT_TOKEN, capturedGpus, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "health-agents-"));
let agent: TestAgent;
let worker: Worker;
const received: FromHealth[] = [];

beforeAll(async () => {
  agent = await startAgent("node-a", join(tmp, "a"), capturedGpus("h100", 2, "hw"));
  worker = new Worker(new URL("../../workers/health.ts", import.meta.url).href);
  worker.onmessage = (e: MessageEvent<FromHealth>) => void received.push(e.data);
  const table = new EndpointTable(1);
  worker.postMessage({
    type: "init",
    buffer: table.buffer,
    maxEndpoints: 1,
    signals: new Signals().buffer,
    endpoints: [],
    health: { pollIntervalMs: 100, timeoutMs: 1_000, staleAfterMs: 2_000, timeoutsBeforeUnready: 3 },
    gpuHealth: null,
    gpuSaturation: new SharedArrayBuffer(8),
  } satisfies ToHealth);
  await waitUntil(() => received.some((m) => m.type === "ready"), { what: "worker ready" });
});

afterAll(async () => {
  worker.terminate();
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("health worker and node agents", () => {
  test("posts every poll of the agents it is given, and follows a new list", async () => {
    worker.postMessage({
      type: "agents",
      agents: [{ node: "node-a", url: agent.url, token: AGENT_TOKEN, dcgmUrl: undefined }],
      settings: { intervalMs: 100, timeoutMs: 1_000 },
    } satisfies ToHealth);
    const first = await waitUntil(() => received.find((m): m is Extract<FromHealth, { type: "agent" }> => m.type === "agent" && m.snapshot.ok), {
      what: "an agent poll",
    });
    expect(first.node).toBe("node-a");
    expect(first.snapshot.state?.gpus.map((g) => [g.index, g.class])).toEqual([
      [0, "h100-80g"],
      [1, "h100-80g"],
    ]);
    worker.postMessage({
      type: "agents",
      agents: [{ node: "node-x", url: agent.url, token: "wrong", dcgmUrl: undefined }],
      settings: { intervalMs: 100, timeoutMs: 1_000 },
    } satisfies ToHealth);
    const wrong = await waitUntil(() => received.find((m): m is Extract<FromHealth, { type: "agent" }> => m.type === "agent" && m.node === "node-x"), {
      what: "a poll of the new list",
    });
    expect(wrong.snapshot).toMatchObject({ ok: false, lastError: "GET /v1/state: HTTP 401" });
    const count = received.filter((m) => m.type === "agent" && m.node === "node-a").length;
    await Bun.sleep(300);
    expect(received.filter((m) => m.type === "agent" && m.node === "node-a").length).toBe(count);
  });
});
