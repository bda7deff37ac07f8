/**
 * A literal fleet for the autoscaling controller (what the fleet manager
 * answers it): one autoscaled model whose replicas serve at once unless a
 * test says otherwise, each running a fixed load; and a driver that sends
 * the request path's demand one second at a time.
 */
import type { FleetAutoscalingSpec, FleetModelSpec } from "../../src/config/types.ts";
import type { DemandSignals } from "../../src/control/autoscale/demand.ts";
import type { AutoscaledFleet, FleetAutoscaler } from "../../src/control/autoscale/fleet-autoscaler.ts";

export const AUTOSCALING: FleetAutoscalingSpec = {
  minReplicas: 1,
  maxReplicas: 6,
  slo: { ttftMs: 2000, itlMs: 100 },
  intervalMs: 1000,
  scaleDownWindowMs: 0,
  scaleDownEveryMs: 0,
};

function spec(replicas: number, over: Partial<FleetModelSpec> = {}): FleetModelSpec {
  return {
    name: "m",
    engine: "sim",
    replicas,
    tensorParallel: 1,
    nodesPerReplica: 1,
    gpuClass: undefined,
    minGpuMemoryGiB: undefined,
    quantization: undefined,
    engineArgs: [],
    pool: "default",
    maxNumSeqs: undefined,
    gpuMemoryUtilization: undefined,
    startupMs: undefined,
    adapters: [{ name: "m-lora", path: "/a" }],
    lora: { maxLoras: 1 },
    autoscaling: AUTOSCALING,
    ...over,
  };
}

/** A fleet whose replicas serve as soon as `servingFrom` has passed, each running `running` sequences at `kv` usage. */
export class LiteralFleet implements AutoscaledFleet {
  leader = true;
  pinned = false;
  room = 10;
  running = 8;
  kv = 0.8;
  readonly sets: number[] = [];
  model: FleetModelSpec;
  replicaList: { id: string; createdAt: number; serving: boolean }[] = [];

  constructor(
    replicas: number,
    private readonly clock: { now: number },
  ) {
    this.model = spec(replicas);
    for (let i = 0; i < replicas; i++) this.replicaList.push({ id: `r${i}`, createdAt: 0, serving: true });
  }
  models() {
    return [{ spec: this.model, pinned: this.pinned }];
  }
  replicas() {
    return this.replicaList;
  }
  load() {
    return { running: this.running, waiting: 0, kvUsage: this.kv };
  }
  placeable(_model: string, upTo: number) {
    return Math.min(upTo, this.room);
  }
  isLeader() {
    return this.leader;
  }
  async setReplicas(_model: string, n: number) {
    this.sets.push(n);
    this.model = { ...this.model, replicas: n };
    for (let i = this.replicaList.length; i < n; i++) this.replicaList.push({ id: `r${i}`, createdAt: this.clock.now, serving: false });
    this.replicaList = this.replicaList.slice(0, n);
  }
}

/** `rps` requests a second for `seconds`, each in flight 4 s, with TTFTs and TPOTs within the SLO. */
function drive(demand: DemandSignals, name: string, rps: number, held: { n: number }) {
  const d = demand.of(name);
  if (!d) return;
  for (let i = 0; i < rps; i++) {
    d.arrived();
    d.prompt(200);
    d.firstToken(300);
    held.n++;
  }
  // Little: 4 s in flight at `rps` a second.
  while (held.n > rps * 4) {
    d.finished(40);
    held.n--;
  }
}

export async function runFor(seconds: number, a: FleetAutoscaler, demand: DemandSignals, clock: { now: number }, rps: number, name = "m") {
  const held = { n: 0 };
  for (let s = 0; s < seconds; s++) {
    drive(demand, name, rps, held);
    clock.now += 1000;
    await a.tick();
  }
}
