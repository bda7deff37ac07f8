/**
 * The fleet series (nodes by state, node readiness, fabric ports, replicas by
 * model and state, models desired vs serving), each computed when Prometheus
 * scrapes from one read of the fleet (src/control/metric-figures.ts): no gauge
 * is kept current by a ticker. A gateway without a fleet exports none of
 * them; the per-GPU series have their own collector (gpu-collector.ts).
 */
import { Counter, Gauge, type Registry } from "prom-client";
import { FLEET, NODE_STATES, type NodeState, REPLICA_STATES, type ReplicaState } from "./names.ts";

/** What the collector needs of the fleet at one instant. */
export interface FleetSeriesInput {
  nodes: readonly { name: string; state: NodeState; answering: boolean }[];
  fabric: readonly { node: string; adapter: string; port: number; linkLayer: string | undefined; rateBytesPerSecond: number | undefined; active: boolean }[];
  replicas: readonly { model: string; state: ReplicaState }[];
  models: readonly { name: string; desired: number; serving: number }[];
}

/** Replica counts per model and state: every state of every model present, zeros included (a known zero, not an absent figure). */
export function replicaCounts(input: Pick<FleetSeriesInput, "replicas" | "models">): Map<string, Record<ReplicaState, number>> {
  const out = new Map<string, Record<ReplicaState, number>>();
  const row = (model: string) => {
    let r = out.get(model);
    if (!r) out.set(model, (r = Object.fromEntries(REPLICA_STATES.map((s) => [s, 0])) as Record<ReplicaState, number>));
    return r;
  };
  for (const m of input.models) row(m.name);
  for (const r of input.replicas) row(r.model)[r.state]++;
  return out;
}

/**
 * Read once, shared by every call in the same synchronous run: prom-client
 * calls each metric's collect() in one loop before awaiting anything, so one
 * scrape sees one instant of the fleet, and a later call reads afresh.
 */
export function oncePerRun<T>(read: () => T): () => T {
  let cached: { value: T } | undefined;
  return () => {
    if (!cached) {
      cached = { value: read() };
      queueMicrotask(() => (cached = undefined));
    }
    return cached.value;
  };
}

/** A gauge set afresh at each scrape from `read` (undefined: no series). */
export function scrapeGauge<L extends string, T>(
  registry: Registry,
  d: { name: string; help: string; labels: readonly L[] },
  read: () => T | undefined,
  fill: (g: Gauge<L>, value: T) => void,
): Gauge<L> {
  return new Gauge<L>({
    name: d.name,
    help: d.help,
    labelNames: d.labels,
    registers: [registry],
    collect() {
      this.reset();
      const v = read();
      if (v !== undefined) fill(this, v);
    },
  });
}

/** Register the fleet gauges over `read` (undefined: no fleet, no series). */
export function registerFleetCollector(registry: Registry, read: () => FleetSeriesInput | undefined): void {
  const fleet = oncePerRun(read);
  const gauge = <L extends string>(d: { name: string; help: string; labels: readonly L[] }, fill: (g: Gauge<L>, f: FleetSeriesInput) => void) =>
    scrapeGauge(registry, d, fleet, fill);
  gauge(FLEET.nodes, (g, f) => {
    for (const state of NODE_STATES) g.set({ state }, f.nodes.filter((n) => n.state === state).length);
  });
  gauge(FLEET.nodeReady, (g, f) => {
    for (const n of f.nodes) g.set({ node: n.name }, n.answering ? 1 : 0);
  });
  const portLabels = (p: FleetSeriesInput["fabric"][number]) => ({
    node: p.node,
    adapter: p.adapter,
    port: String(p.port),
    ...(p.linkLayer ? { link_layer: p.linkLayer } : {}),
  });
  gauge(FLEET.fabricPortRate, (g, f) => {
    for (const p of f.fabric) if (p.rateBytesPerSecond !== undefined) g.set(portLabels(p), p.rateBytesPerSecond);
  });
  gauge(FLEET.fabricPortActive, (g, f) => {
    for (const p of f.fabric) g.set(portLabels(p), p.active ? 1 : 0);
  });
  gauge(FLEET.replicas, (g, f) => {
    for (const [model, counts] of replicaCounts(f)) for (const state of REPLICA_STATES) g.set({ model, state }, counts[state]);
  });
  gauge(FLEET.modelReplicasDesired, (g, f) => {
    for (const m of f.models) g.set({ model: m.name }, m.desired);
  });
  // Exported for every desired model, 0 when nothing serves it: the below-desired alert needs the 0.
  gauge(FLEET.modelReplicasServing, (g, f) => {
    for (const m of f.models) g.set({ model: m.name }, m.serving);
  });
}

/** The fleet's LoRA adapters at one instant: counts of agent calls and what is loaded, by base model. */
interface AdapterSeriesInput {
  loads: ReadonlyMap<string, { ok: number; failed: number }>;
  unloads: ReadonlyMap<string, { ok: number; failed: number }>;
  /** Models that declare adapters, with the (adapter, replica) pairs loaded now. */
  loaded: ReadonlyMap<string, number>;
}

/** Register the adapter series over `read` (undefined: no fleet, no series). */
export function registerAdapterCollector(registry: Registry, read: () => AdapterSeriesInput | undefined): void {
  const counter = (
    d: { name: string; help: string; labels: readonly ("model" | "result")[] },
    pick: (i: AdapterSeriesInput) => ReadonlyMap<string, { ok: number; failed: number }>,
  ) =>
    new Counter<"model" | "result">({
      name: d.name,
      help: d.help,
      labelNames: d.labels,
      registers: [registry],
      collect() {
        this.reset();
        const i = read();
        if (!i) return;
        for (const model of i.loaded.keys()) for (const result of ["ok", "failed"] as const) this.inc({ model, result }, pick(i).get(model)?.[result] ?? 0);
      },
    });
  counter(FLEET.adapterLoads, (i) => i.loads);
  counter(FLEET.adapterUnloads, (i) => i.unloads);
  new Gauge<"model">({
    name: FLEET.adaptersLoaded.name,
    help: FLEET.adaptersLoaded.help,
    labelNames: FLEET.adaptersLoaded.labels,
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, n] of read()?.loaded ?? []) this.set({ model }, n);
    },
  });
}
