/**
 * Scenario (issue 13, "drain uses it"): two real agents running sim-engine
 * replicas of one model for a real `llmgw serve` with a fleet. Long streams
 * are open on node-a's replica when node-a is drained with a grace period
 * far shorter than the streams: when the grace period is over the fleet
 * manager stops the replica, and every stream still open on it is moved —
 * continued on node-b — instead of cut. Each client reads one whole answer,
 * byte-identical to the same request answered undisturbed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ssePayloads, type Transcript, transcriptOf } from "../../src/bench/answer-transcript.ts";
import { counterValue, type Gateway } from "../helpers/cluster.ts";
import { capturedGpus, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { fleetCall, fleetGatewayConfig, serving, startFleetGateway } from "../helpers/fleet-gateway.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-long";
const tmp = mkdtempSync(join(tmpdir(), "fleet-drain-continue-"));
let a: TestAgent;
let b: TestAgent;
let gw: Gateway;

beforeAll(async () => {
  [a, b] = await Promise.all([
    startAgent("node-a", join(tmp, "a"), capturedGpus("h200", 2, "aa")),
    startAgent("node-b", join(tmp, "b"), capturedGpus("h100", 2, "bb")),
  ]);
  // 25 ms a token: a 100-token answer takes 2.5 s, far past the drain's 300 ms grace period.
  const model = { name: MODEL, engine: "sim", replicas: 2, engine_args: ["--itl-ms", "25", "--output-len", "400"] };
  gw = await startFleetGateway(fleetGatewayConfig(join(tmp, "data"), [a, b], { models: [model] }));
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

function body(n: number): Record<string, unknown> {
  return {
    model: MODEL,
    stream: true,
    max_tokens: 100,
    seed: 5,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content: `Walk me through harbour ${n}` }],
  };
}

async function stream(b: Record<string, unknown>): Promise<{ endpoint: string | null; t: Transcript }> {
  const res = await fetch(`${gw.api}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(b) });
  expect(res.status).toBe(200);
  return { endpoint: res.headers.get("x-llmgw-endpoint"), t: transcriptOf(ssePayloads(await res.text()), "chat") };
}

describe("a drain whose grace period ends with streams open", () => {
  test("moves them to the other node's replica: every stream completes, byte-identical", async () => {
    const before = await waitUntil(
      async () => {
        const s = await serving(gw, MODEL);
        return s.length === 2 ? s : null;
      },
      { timeoutMs: 40_000, what: "2 replicas in rotation" },
    );
    const original = before.find((e) => e.node === "node-a")!;

    const bodies = Array.from({ length: 8 }, (_, i) => body(i));
    const running = bodies.map((x) => stream(x));
    await Bun.sleep(500); // every stream has tokens out
    const drain = await fleetCall(gw, "POST", "/nodes/node-a/drain", { grace_ms: 300 });
    expect(drain.status).toBeLessThan(300);
    const results = await Promise.all(running);

    const onOriginal = results.filter((r) => r.endpoint === original.id).length;
    expect(onOriginal).toBeGreaterThan(0);
    // The same requests, undisturbed (the sim's answer is a function of the prompt and seed).
    for (let i = 0; i < bodies.length; i++) {
      const { t } = results[i]!;
      const want = (await stream(bodies[i]!)).t;
      expect(want.errors).toEqual([]);
      expect(t.errors).toEqual([]);
      expect(t.text).toBe(want.text);
      expect([t.ids.size, t.roles, t.finishes, t.usages, t.done]).toEqual([1, 1, want.finishes, want.usages, 1]);
    }
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text();
    expect(counterValue(metrics, "llmgw_stream_recoveries_total", { cause: "drained", result: "recovered" })).toBe(onOriginal);
    expect(counterValue(metrics, "llmgw_stream_recoveries_total", { cause: "cut" })).toBe(0);
    expect(gw.output()).toContain("open streams moved to other replicas");
    await waitUntil(async () => (await serving(gw, MODEL)).every((e) => e.node === "node-b"), { what: "node-a empty" });
  }, 90_000);
});
