/**
 * Scenario: two real agents (2 GPUs each, fake nvidia-smi from the shared
 * captures) launching real sim-engines, one real `llmgw serve` whose only
 * model is autoscaled (1..4 replicas, decisions every second). A small KV
 * cache makes one replica hold about 8 streams. Checked streaming load
 * ramps 2 → 16 clients → none: the autoscaler adds replicas as load rises
 * and drains them as it falls, with no failed or truncated stream; `llmgw
 * ctl autoscale` (the real CLI) shows the decisions and their reasons, and
 * the metrics listener the llmgw_autoscaler_* series. A manual `ctl scale`
 * pins the count until `ctl scale MODEL auto` hands it back. A model
 * scaled to zero starts its first replica for the first request, which
 * waits for it and is answered; one whose replica fits nowhere answers 503
 * with Retry-After at its deadline. Each cold start writes an audit line.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startCheckedLoad } from "../../src/bench/checked-stream-load.ts";
import { counterValue, type Gateway } from "../helpers/cluster.ts";
import { capturedGpus, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { ctl, fleetCall, fleetGatewayConfig, serving, startFleetGateway } from "../helpers/fleet-gateway.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const MODEL = "sim-auto";
/** Scaled to zero: starts with none. */
const ZERO = "sim-zero";
/** Scaled to zero, but no node has the GPUs one replica needs. */
const NOWHERE = "sim-nowhere";
const tmp = mkdtempSync(join(tmpdir(), "fleet-autoscale-e2e-"));
let a: TestAgent;
let b: TestAgent;
let gw: Gateway;

/** Desired replicas as the management API says. */
async function desired(model = MODEL): Promise<number> {
  const r = await fleetCall(gw, "GET", "/models");
  return ((r.json.models as { name: string; desired: number }[]).find((m) => m.name === model) ?? { desired: -1 }).desired;
}

/** A sim model at zero that scales from it, one replica at most, waiting `waitMs` for it. */
function scaledToZero(name: string, waitMs: number): Record<string, unknown> {
  return {
    name,
    engine: "sim",
    replicas: 0,
    autoscaling: {
      min_replicas: 0,
      max_replicas: 1,
      slo: { ttft_ms: 2_000, itl_ms: 200 },
      interval_ms: 1_000,
      scale_to_zero: true,
      cold_start_wait_ms: waitMs,
    },
  };
}

function audits(kind: string): Record<string, unknown>[] {
  return gw
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{") && l.includes(`"audit":"${kind}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
const coldStartAudits = () => audits("cold_start");

const chat = (model: string) =>
  fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, max_tokens: 4, stream: true, messages: [{ role: "user", content: "hello" }] }),
  });

beforeAll(async () => {
  [a, b] = await Promise.all([
    startAgent("node-a", join(tmp, "a"), capturedGpus("h100", 2, "aa")),
    startAgent("node-b", join(tmp, "b"), capturedGpus("h100", 2, "bb")),
  ]);
  gw = await startFleetGateway(
    fleetGatewayConfig(join(tmp, "data"), [a, b], {
      drain_grace_ms: 20_000,
      models: [
        {
          name: MODEL,
          engine: "sim",
          replicas: 1,
          // ~8 sequences fill a replica's cache: 24 blocks of 16 tokens, a request holds ~3.
          engine_args: ["--num-gpu-blocks", "24", "--max-num-seqs", "16", "--itl-ms", "25"],
          autoscaling: {
            min_replicas: 1,
            max_replicas: 4,
            slo: { ttft_ms: 2_000, itl_ms: 200 },
            interval_ms: 1_000,
            scale_down_window_ms: 4_000,
            scale_down_every_ms: 2_000,
            assumed_startup_ms: 3_000,
          },
        },
        scaledToZero(ZERO, 30_000),
        { ...scaledToZero(NOWHERE, 1_500), tensor_parallel: 8 },
      ],
    }),
  );
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("an autoscaled model over two real agents", () => {
  test("load 2 → 16 clients adds replicas, its end drains them back to 1, and no stream fails", async () => {
    await waitUntil(async () => ((await serving(gw, MODEL)).length === 1 ? true : null), { timeoutMs: 30_000, what: "1 replica serving" });
    const url = `${gw.api}/v1/chat/completions`;
    const light = startCheckedLoad({ url, clients: 2, model: MODEL, maxTokens: 24 });
    await Bun.sleep(4_000);
    expect(await desired()).toBe(1);
    const heavy = startCheckedLoad({ url, clients: 14, model: MODEL, maxTokens: 24 });
    const peak = await waitUntil(
      async () => {
        const s = await serving(gw, MODEL);
        return s.length >= 3 ? s.length : null;
      },
      { timeoutMs: 40_000, what: "3 or more replicas serving under 16 clients" },
    );
    expect(peak).toBeGreaterThanOrEqual(3);
    // The load goes on a while on the larger fleet.
    const atPeak = heavy.results.length;
    await waitUntil(() => (heavy.results.length >= atPeak + 150 ? true : null), { timeoutMs: 30_000, what: "150 more requests at the peak" });
    const reports = [await heavy.stop(), await light.stop()];
    await waitUntil(async () => ((await desired()) === 1 && (await serving(gw, MODEL)).length === 1 ? true : null), {
      timeoutMs: 50_000,
      what: "back to 1 replica after the load ended",
    });
    for (const r of reports) {
      console.error(`autoscale load: ${JSON.stringify({ requests: r.requests, ok: r.ok, byEndpoint: r.byEndpoint })}`);
      expect(r.firstFailures).toEqual([]);
      expect({ non200: r.non200, broken: r.broken }).toEqual({ non200: 0, broken: 0 });
    }
    // Replicas beyond the first served some of the load.
    expect(Object.keys(reports[0]!.byEndpoint).length).toBeGreaterThanOrEqual(3);

    const shown = await ctl(gw, ["autoscale"]);
    console.error(shown.out);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain(MODEL);
    expect(shown.out).toContain("last decisions, newest first");
    const json = JSON.parse((await ctl(gw, ["--json", "autoscale"])).out) as {
      models: { model: string; decisions: { reason: string; current: number; desired: number }[]; startup_ms: number | null }[];
    };
    const m = json.models.find((x) => x.model === MODEL)!;
    expect(m.decisions.some((d) => d.desired > d.current)).toBe(true);
    expect(m.decisions.some((d) => d.desired < d.current)).toBe(true);
    expect(m.startup_ms).not.toBeNull();

    // The series count what the last decision saw: 1 from the next decision on.
    const metrics = await waitUntil(
      async () => {
        const text = await (await fetch(`${gw.admin}/metrics`)).text();
        return counterValue(text, "llmgw_autoscaler_current_replicas", { model: MODEL }) === 1 ? text : null;
      },
      { timeoutMs: 10_000, what: "llmgw_autoscaler_current_replicas 1" },
    );
    expect(counterValue(metrics, "llmgw_autoscaler_pinned", { model: MODEL })).toBe(0);
    expect(counterValue(metrics, "llmgw_autoscaler_startup_seconds", { model: MODEL })).toBeGreaterThan(0);
    const decided = ["forecast", "slo-breach", "surge", "min-replicas", "hold", "down-window", "pacing"].reduce(
      (n, reason) => n + counterValue(metrics, "llmgw_autoscaler_decisions_total", { model: MODEL, reason }),
      0,
    );
    expect(decided).toBeGreaterThan(10);
    // Every change of the count is an audit line: up to the peak and back to 1.
    const scales = audits("scale")
      .filter((a) => a.model === MODEL)
      .map((a) => a.scale as { from: number; to: number; reason: string });
    expect(scales.some((x) => x.to > x.from)).toBe(true);
    expect(scales.at(-1)!.to).toBe(1);
    for (let i = 1; i < scales.length; i++) expect(scales[i]!.from).toBe(scales[i - 1]!.to);
  }, 120_000);

  test("ctl scale pins the count against the autoscaler until ctl scale MODEL auto", async () => {
    const pin = await ctl(gw, ["scale", MODEL, "2"]);
    expect({ code: pin.code, err: pin.err }).toEqual({ code: 0, err: "" });
    expect(pin.out).toContain("pinned");
    // Idle, the autoscaler would walk it down to 1: pinned, it stays at 2.
    await Bun.sleep(4_000);
    expect(await desired()).toBe(2);
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text();
    expect(counterValue(metrics, "llmgw_autoscaler_pinned", { model: MODEL })).toBe(1);
    const release = await ctl(gw, ["scale", MODEL, "auto"]);
    expect({ code: release.code, err: release.err }).toEqual({ code: 0, err: "" });
    await waitUntil(async () => ((await desired()) === 1 ? true : null), { timeoutMs: 20_000, what: "the autoscaler back in charge" });
  }, 40_000);

  test("a model at zero starts a replica for its first request, which waits for it and is answered; the cold start is audited", async () => {
    expect(await desired(ZERO)).toBe(0);
    const started = Date.now();
    const [first, second] = await Promise.all([chat(ZERO), chat(ZERO)]);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(await first.text()).toContain("data: [DONE]");
    await second.text();
    console.error(`cold start answered in ${Date.now() - started} ms`);
    expect(await desired(ZERO)).toBe(1);
    const audit = await waitUntil(() => coldStartAudits().find((a) => a.model === ZERO) ?? null, { what: "the cold start's audit line" });
    expect(audit.outcome).toBe("serving");
    expect(audit.lines).toEqual({ total: 2, completed: 2, failed: 0 });
    expect((audit.durations_ms as { total: number }).total).toBeGreaterThan(0);
    const json = JSON.parse((await ctl(gw, ["--json", "autoscale"])).out) as { models: { model: string; decisions: { reason: string; desired: number }[] }[] };
    expect(json.models.find((m) => m.model === ZERO)!.decisions.some((d) => d.reason === "cold-start" && d.desired === 1)).toBe(true);
    const metrics = await (await fetch(`${gw.admin}/metrics`)).text();
    expect(counterValue(metrics, "llmgw_autoscaler_decisions_total", { model: ZERO, reason: "cold-start" })).toBe(1);
  }, 40_000);

  test("a model at zero whose replica fits nowhere answers 503 with Retry-After at its deadline, and the autoscaler says no-gpus", async () => {
    const started = Date.now();
    const res = await chat(NOWHERE);
    const waited = Date.now() - started;
    expect(res.status).toBe(503);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("NO_READY_ENDPOINT");
    expect(body.error.message).toContain("scaled to zero");
    expect(waited).toBeGreaterThanOrEqual(1_400);
    const audit = await waitUntil(() => coldStartAudits().find((a) => a.model === NOWHERE) ?? null, { what: "the unserved cold start's audit line" });
    expect(audit.outcome).toBe("unserved");
    expect(audit.lines).toEqual({ total: 1, completed: 0, failed: 1 });
    const json = JSON.parse((await ctl(gw, ["--json", "autoscale"])).out) as { models: { model: string; decisions: { reason: string }[] }[] };
    expect(json.models.find((m) => m.model === NOWHERE)!.decisions.some((d) => d.reason === "no-gpus")).toBe(true);
  }, 30_000);
});
