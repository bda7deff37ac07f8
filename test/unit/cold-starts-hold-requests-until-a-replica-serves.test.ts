/**
 * The waits of a model scaled to zero: only such models (and their
 * adapters) hold requests, every waiting request is released together when
 * a replica serves, each gives up at its own deadline or with its client,
 * the wait is bounded per model, the autoscaler is asked once per cold
 * start, and each cold start writes one audit line.
 */
import { describe, expect, test } from "bun:test";
import type { FleetModelSpec } from "../../src/config/types.ts";
import type { StoredModel } from "../../src/control/types.ts";
import { ColdStarts } from "../../src/serve/cold-starts.ts";
import type { Logger } from "../../src/shared/logger.ts";

function model(name: string, scaleToZero: boolean): StoredModel {
  const spec = {
    name,
    engine: "sim",
    replicas: 0,
    tensorParallel: 1,
    nodesPerReplica: 1,
    engineArgs: [],
    pool: "default",
    adapters: [{ name: `${name}-lora`, path: "/a" }],
    autoscaling: { minReplicas: 0, maxReplicas: 2, slo: { ttftMs: 1000, itlMs: 100 }, scaleToZero, coldStartWaitMs: 5_000 },
  } as unknown as FleetModelSpec;
  return { spec, source: "config", configHash: null, updatedAt: 0 };
}

/** A fleet of two autoscaled models at zero, one of them scaling from zero; `serving` is what servingCount answers. */
function setup() {
  const serving = new Map<string, number>();
  const asked: string[] = [];
  const lines: Record<string, unknown>[] = [];
  const fleet = {
    state: {
      models: new Map([
        ["zero", model("zero", true)],
        ["kept", model("kept", false)],
      ]),
    },
    servingCount: (m: string) => serving.get(m) ?? 0,
    autoscaler: {
      coldStart: async (m: string) => void asked.push(m),
      status: () => [{ model: "zero", measuredStartupMs: 4_000, policy: { startupMs: 120_000 } }],
    },
  };
  const log = {
    info: (record: Record<string, unknown>) => void lines.push(record),
    error: () => {},
    isLevelEnabled: () => true,
  } as unknown as Logger;
  const cold = new ColdStarts(fleet as unknown as ConstructorParameters<typeof ColdStarts>[0], log);
  const audits = () => lines.filter((l) => l.audit === "cold_start");
  return { cold, serving, asked, audits };
}

const req = (i: number) => ({ requestId: `r${i}`, tenant: "t", path: "/v1/chat/completions" });

describe("cold starts", () => {
  test("only a model that scales from zero holds requests, its adapters too, and only while nothing serves it", () => {
    const { cold, serving } = setup();
    expect(cold.waitFor("kept")).toBeUndefined();
    expect(cold.waitFor("unknown")).toBeUndefined();
    expect(cold.waitFor("zero")).toBe(5_000);
    expect(cold.waitFor("zero-lora")).toBe(5_000);
    serving.set("zero", 1);
    expect(cold.waitFor("zero")).toBeUndefined();
  });

  test("every waiting request goes on together when a replica serves; the autoscaler is asked once; one audit line", async () => {
    const { cold, serving, asked, audits } = setup();
    const waits = Array.from({ length: 50 }, (_, i) => cold.wait(i % 2 ? "zero" : "zero-lora", req(i), new AbortController().signal, 5_000));
    expect(asked).toEqual(["zero"]);
    await Bun.sleep(250);
    serving.set("zero", 1);
    const outcomes = await Promise.all(waits);
    expect(outcomes.every((o) => o.kind === "serving")).toBe(true);
    expect(audits()).toHaveLength(1);
    expect(audits()[0]).toMatchObject({ model: "zero", request_id: "r0", outcome: "serving", lines: { total: 50, completed: 50, failed: 0 } });
  });

  test("a request gives up at its deadline with what is left of the start-up as Retry-After, or when its client leaves", async () => {
    const { cold, audits } = setup();
    const client = new AbortController();
    const leaving = cold.wait("zero", req(1), client.signal, 5_000);
    const timing = cold.wait("zero", req(2), new AbortController().signal, 300);
    client.abort();
    expect(await leaving).toEqual({ kind: "aborted" });
    const t = await timing;
    expect(t.kind).toBe("timeout");
    // A 4 s start-up measured, 0.3 s of it gone.
    expect(t.kind === "timeout" && t.retryAfterS).toBe(4);
    expect(audits()).toHaveLength(1);
    expect(audits()[0]).toMatchObject({ outcome: "unserved", lines: { total: 2, completed: 0, failed: 2 } });
  });

  test("at most 1,000 requests wait per model; the next is refused at once", async () => {
    const { cold } = setup();
    const abort = new AbortController();
    const waits = Array.from({ length: 1_000 }, (_, i) => cold.wait("zero", req(i), abort.signal, 5_000));
    expect(await cold.wait("zero", req(1_000), abort.signal, 5_000)).toEqual({ kind: "full", waiting: 1_000 });
    abort.abort();
    await Promise.all(waits);
    cold.close();
  });
});
