/**
 * The fleet's autoscaling controller over a literal fleet: the request
 * path's demand (bounded, adapters counted toward their base), decisions
 * only on the leader, a pinned model decided on but left as the operator
 * set it, start-ups measured from the replicas it saw start, placement's
 * room passed to the autoscaler — and the config block that turns it on,
 * validated with the key named.
 */
import { describe, expect, test } from "bun:test";
import { fleetConfigIssues, fleetSchema, toFleetModel } from "../../src/config/fleet-schema.ts";
import { Autoscaler } from "../../src/control/autoscale/autoscaler.ts";
import { DemandSignals } from "../../src/control/autoscale/demand.ts";
import { autoscalePolicy, FleetAutoscaler } from "../../src/control/autoscale/fleet-autoscaler.ts";
import { DEFAULT_AUTOSCALE_INTERVAL_MS, DEFAULT_STARTUP_MS } from "../../src/control/autoscale/policy.ts";
import { logger } from "../../src/shared/logger.ts";
import { AUTOSCALING, LiteralFleet, runFor } from "../helpers/autoscaled-fleet.ts";

describe("the fleet autoscaler", () => {
  test("on the leader, rising demand raises the model's desired count through the fleet; requests for its adapter count toward it", async () => {
    const clock = { now: 0 };
    const fleet = new LiteralFleet(1, clock);
    const demand = new DemandSignals();
    const a = new FleetAutoscaler(fleet, demand, { now: () => clock.now, log: logger() });
    await a.tick(); // opens the window
    // 10 rps × 4 s = 40 in flight; a replica's cache holds 8 / 0.8 = 10 sequences: several replicas.
    await runFor(20, a, demand, clock, 10, "m-lora");
    expect(fleet.sets.length).toBeGreaterThan(0);
    expect(fleet.model.replicas).toBeGreaterThanOrEqual(4);
    const st = a.status()[0]!;
    expect(st.decisions.length).toBeGreaterThan(0);
    expect(st.decisions.some((d) => d.reason === "forecast" || d.reason === "slo-breach" || d.reason === "surge")).toBe(true);
    expect([...st.reasons.values()].reduce((x, y) => x + y, 0)).toBe(st.decisions.length);
  });

  test("a follower takes no decision and changes nothing; its windows are dropped", async () => {
    const clock = { now: 0 };
    const fleet = new LiteralFleet(1, clock);
    fleet.leader = false;
    const demand = new DemandSignals();
    const a = new FleetAutoscaler(fleet, demand, { now: () => clock.now, log: logger() });
    await a.tick();
    await runFor(10, a, demand, clock, 10);
    expect(fleet.sets).toEqual([]);
    expect(a.status()[0]!.decisions).toEqual([]);
    expect(demand.take("m").arrivals).toBe(0);
  });

  test("a pinned model is decided on but left at the operator's count", async () => {
    const clock = { now: 0 };
    const fleet = new LiteralFleet(1, clock);
    fleet.pinned = true;
    const demand = new DemandSignals();
    const a = new FleetAutoscaler(fleet, demand, { now: () => clock.now, log: logger() });
    await a.tick();
    await runFor(10, a, demand, clock, 10);
    expect(fleet.sets).toEqual([]);
    const st = a.status()[0]!;
    expect(st.pinned).toBe(true);
    expect(st.decisions.at(-1)!.desired).toBeGreaterThan(1);
  });

  test("what placement can add bounds the ask, and the decision says no-gpus", async () => {
    const clock = { now: 0 };
    const fleet = new LiteralFleet(1, clock);
    fleet.room = 1;
    const demand = new DemandSignals();
    const a = new FleetAutoscaler(fleet, demand, { now: () => clock.now, log: logger() });
    await a.tick();
    await runFor(3, a, demand, clock, 10);
    expect(fleet.sets[0]).toBe(2);
    expect(a.status()[0]!.decisions.some((d) => d.reason === "no-gpus")).toBe(true);
  });

  test("a start-up is measured from a replica seen starting to its serving", async () => {
    const clock = { now: 0 };
    const fleet = new LiteralFleet(1, clock);
    const demand = new DemandSignals();
    const a = new FleetAutoscaler(fleet, demand, { now: () => clock.now, log: logger() });
    await a.tick();
    await runFor(3, a, demand, clock, 10);
    expect(a.status()[0]!.measuredStartupMs).toBeNull();
    const started = fleet.replicaList.filter((r) => !r.serving);
    expect(started.length).toBeGreaterThan(0);
    clock.now += 7_000;
    for (const r of started) r.serving = true;
    await runFor(1, a, demand, clock, 10);
    const measured = a.status()[0]!.measuredStartupMs!;
    expect(measured).toBeGreaterThanOrEqual(8_000);
    expect(measured).toBeLessThan(12_000);
  });
});

describe("scale to zero", () => {
  test("with min 0 an idle model walks down to zero; a request at zero is a cold start of one replica, whatever the law has learned", () => {
    const policy = autoscalePolicy({ ...AUTOSCALING, minReplicas: 0, scaleToZero: true, scaleDownWindowMs: 0, scaleDownEveryMs: 0 });
    const a = new Autoscaler(policy);
    const sample = (at: number, current: number, arrivals: number) => ({
      at,
      arrivals,
      inflight: 0,
      ttftMs: [],
      itlMs: [],
      replicas: Array.from({ length: current }, () => ({ running: 0, waiting: 0, kvUsage: 0 })),
      provisioned: current,
      ready: current,
    });
    let current = 1;
    const reasons: string[] = [];
    // Six idle minutes at one decision a second.
    for (let s = 1; s <= 360; s++) {
      const d = a.decide(sample(s * 1000, current, 0));
      reasons.push(d.reason);
      current = d.desired;
    }
    expect(current).toBe(0);
    expect(reasons).toContain("idle");
    const cold = a.decide(sample(361_000, 0, 1));
    expect({ desired: cold.desired, reason: cold.reason }).toEqual({ desired: 1, reason: "cold-start" });
    // At zero with nothing arriving it stays there.
    const b = new Autoscaler(policy);
    expect(b.decide(sample(1000, 0, 0)).desired).toBe(0);
  });
});

describe("the request path's demand", () => {
  test("an unwatched model collects nothing; a window keeps at most its latest 4,096 latencies; in flight never goes below 0", () => {
    const demand = new DemandSignals();
    expect(demand.of("m")).toBeUndefined();
    demand.watch([{ model: "m", aliases: ["m-lora"] }]);
    const d = demand.of("m-lora")!;
    expect(demand.of("m")).toBe(d);
    for (let i = 0; i < 10_000; i++) {
      d.arrived();
      d.prompt(3);
      d.firstToken(i);
      d.finished(i);
    }
    d.finished(undefined);
    const w = demand.take("m");
    expect(w.arrivals).toBe(10_000);
    expect(w.inflight).toBe(0);
    expect(w.ttftMs.length).toBe(4_096);
    expect(Math.min(...w.ttftMs)).toBe(10_000 - 4_096);
    expect(w.promptTokens).toBe(30_000);
    expect(demand.take("m")).toEqual({ arrivals: 0, inflight: 0, ttftMs: [], itlMs: [], promptTokens: 0 });
    demand.watch([]);
    expect(demand.of("m")).toBeUndefined();
  });
});

describe("fleet.models[].autoscaling in the config", () => {
  const parse = (autoscaling: unknown, replicas = 2) => fleetSchema.safeParse({ models: [{ name: "m", engine: "sim", replicas, autoscaling }] });
  const issues = (autoscaling: unknown, replicas = 2) => {
    const p = parse(autoscaling, replicas);
    if (!p.success) return p.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    return fleetConfigIssues([], p.data, {});
  };
  const ok = { min_replicas: 1, max_replicas: 4, slo: { ttft_ms: 2000, itl_ms: 100 } };

  test("a valid block takes the autoscaler's defaults for what it leaves out", () => {
    expect(issues(ok)).toEqual([]);
    const p = parse(ok);
    if (!p.success) throw new Error("expected a valid block");
    const policy = autoscalePolicy({ minReplicas: 1, maxReplicas: 4, slo: { ttftMs: 2000, itlMs: 100 } });
    expect(policy.intervalMs).toBe(DEFAULT_AUTOSCALE_INTERVAL_MS);
    expect(policy.startupMs).toBe(DEFAULT_STARTUP_MS);
    expect(policy.slo.percentile).toBe(90);
    expect(policy.law).toBe("capacity");
    expect(policy.promptTokensPerReplicaS).toBeUndefined();
    const measured = parse({ ...ok, prompt_tokens_per_replica_s: 16_000 });
    if (!measured.success) throw new Error("expected a valid block");
    expect(autoscalePolicy(toFleetModel(measured.data.models[0]!).autoscaling!).promptTokensPerReplicaS).toBe(16_000);
    expect(issues({ ...ok, prompt_tokens_per_replica_s: 0 })[0]).toStartWith("models.0.autoscaling.prompt_tokens_per_replica_s");
  });

  test("each bad value is named by its key", () => {
    expect(issues({ ...ok, max_replicas: 0 })[0]).toStartWith("models.0.autoscaling.max_replicas");
    expect(issues({ ...ok, law: "pid" })[0]).toStartWith("models.0.autoscaling.law");
    expect(issues({ ...ok, slo: { ttft_ms: 2000 } })[0]).toStartWith("models.0.autoscaling.slo.itl_ms");
    expect(issues({ ...ok, target_utilization: 1.5 })[0]).toStartWith("models.0.autoscaling.target_utilization");
    expect(issues({ ...ok, cooldown: 5 })[0]).toContain("cooldown");
    expect(issues({ ...ok, min_replicas: 3, max_replicas: 2 }, 2)).toEqual(["fleet.models[0].autoscaling.max_replicas: expected at least min_replicas (3)"]);
    expect(issues(ok, 6)).toEqual(["fleet.models[0].replicas: expected within autoscaling's bounds, 1..4 (the count the autoscaler starts from)"]);
    expect(issues({ ...ok, min_replicas: 0 }, 1)).toEqual(["fleet.models[0].autoscaling.min_replicas: expected at least 1, or 0 with scale_to_zero: true"]);
    expect(issues({ ...ok, min_replicas: 0, scale_to_zero: true }, 0)).toEqual([]);
    expect(issues({ ...ok, cold_start_wait_ms: 5000 })).toEqual(["fleet.models[0].autoscaling.cold_start_wait_ms: applies with scale_to_zero: true only"]);
  });
});
