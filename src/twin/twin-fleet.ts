/**
 * A fleet twin: N simulated engines and one gateway's decisions over them,
 * on one virtual clock (twin-engine.ts, twin-gateway.ts), built from the
 * same inputs the real-time benches start processes with: sim-engine flags
 * for the engines and a gateway config mapping (endpoints are added here).
 */
import { buildConfig } from "../config/load.ts";
import type { FleetModelSpec } from "../config/types.ts";
import { EventQueue } from "./event-queue.ts";
import { TwinEngine } from "./twin-engine.ts";
import { TwinFleetManager, type TwinNodes } from "./twin-fleet-manager.ts";
import { TwinGateway } from "./twin-gateway.ts";

/** From an engine's step to the gateway's KV-block index holding its events, simulated ms (publish, ZMQ on loopback, the worker's apply). */
export const DEFAULT_KV_EVENT_DELAY_MS = 2;

interface TwinFleetOptions {
  engines: number;
  model: string;
  /** `llmgw sim-engine` flags for every engine (--model is added). */
  engineFlags: readonly string[];
  /** The gateway's config without `endpoints` (one is added per engine). */
  gateway: Readonly<Record<string, unknown>>;
  /** The endpoints follow the engines' KV-cache events (as `endpoints[].kv_events` configures). */
  kvEvents: boolean;
  seed: number;
  kvEventDelayMs?: number;
  /**
   * Replicas of `spec` placed on `nodes` by the fleet manager's planner,
   * each starting up for the spec's startup_ms: the engines are then the
   * slots its GPUs allow (`engines` is ignored), down until a replica runs on one.
   */
  fleet?: { spec: FleetModelSpec; nodes: TwinNodes };
}

export class TwinFleet {
  readonly clock = new EventQueue();
  readonly engines: TwinEngine[];
  readonly gateway: TwinGateway;
  /** The run's seed: the engines', the gateway's and the requests' randomness derive from it. */
  readonly seed: number;
  /** The fleet manager, in a fleet of nodes. */
  readonly manager: TwinFleetManager | undefined;

  constructor(o: TwinFleetOptions) {
    this.seed = o.seed;
    const count = o.fleet ? TwinFleetManager.slotsFor(o.fleet.nodes, o.fleet.spec.tensorParallel) : o.engines;
    this.engines = Array.from({ length: count }, (_, i) => new TwinEngine(`engine-${i}`, o.model, o.engineFlags, this.clock, o.seed * 1_000_003 + i));
    if (o.kvEvents && this.engines.some((e) => e.fixed.kvEvents === undefined))
      throw new RangeError("the endpoints follow KV-cache events, but the engines publish none (add --kv-events-config to the engine flags)");
    // The endpoints' URLs are never dialled: they only give the config its shape.
    const endpoints = this.engines.map((e) => ({ id: e.id, url: `http://${e.id}.twin.invalid:8000`, models: [o.model] }));
    const raw = { ...o.gateway, max_endpoints: Math.max(count, numberOr(o.gateway.max_endpoints, 0)), endpoints };
    const config = buildConfig(raw, {}, "the twin's gateway config");
    this.gateway = new TwinGateway({
      config,
      engines: this.engines,
      model: o.model,
      clock: this.clock,
      seed: o.seed,
      kvEventDelayMs: o.kvEventDelayMs ?? DEFAULT_KV_EVENT_DELAY_MS,
      followKvEvents: o.kvEvents,
    });
    this.manager = o.fleet ? new TwinFleetManager({ clock: this.clock, gateway: this.gateway, engines: this.engines }, o.fleet.spec, o.fleet.nodes) : undefined;
  }

  /** The engines' prefix-cache hit rate over every lookup so far (NaN before the first) and their preemptions, summed. */
  cacheFigures(): { hitRate: number; preemptions: number } {
    let hits = 0;
    let queries = 0;
    let preemptions = 0;
    for (const e of this.engines) {
      hits += e.core.stats.prefixHits;
      queries += e.core.stats.prefixQueries;
      preemptions += e.core.stats.preemptions;
    }
    return { hitRate: queries > 0 ? hits / queries : NaN, preemptions };
  }
}

function numberOr(v: unknown, fallback: number): number {
  return typeof v === "number" ? v : fallback;
}
