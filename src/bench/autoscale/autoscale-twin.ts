/**
 * One controller over one workload in the fleet twin: the model's replicas
 * placed on GPU nodes by the fleet manager's planner, each starting up for
 * the start-up time, the control plane's autoscaler (or none: a static
 * fleet) deciding every interval on what the gateway samples, and every
 * request scored against both SLOs. The episode runs until the load has
 * ended and the fleet is back at its floor, as llm-d scores it.
 */
import { fleetModelSchema, toFleetModel } from "../../config/fleet-schema.ts";
import { Autoscaler } from "../../control/autoscale/autoscaler.ts";
import {
  type AutoscalePolicy,
  DEFAULT_AUTOSCALE_INTERVAL_MS,
  DEFAULT_MAX_SURGE,
  DEFAULT_SCALE_DOWN_EVERY_MS,
  DEFAULT_SCALE_DOWN_WINDOW_MS,
  DEFAULT_SCALE_UP_WINDOW_MS,
  DEFAULT_STARTUP_MS,
} from "../../control/autoscale/policy.ts";
import { prefillTokensPerS, resolveProfile } from "../../sim/profiles/catalog.ts";
import { type AutoscaleTimelinePoint, meets, TwinAutoscaler } from "../../twin/twin-autoscaler.ts";
import { TwinFleet } from "../../twin/twin-fleet.ts";
import type { ScheduledRequest } from "../replay/open-loop-driver.ts";
import { runTwinOpenLoop } from "../replay/twin-open-loop.ts";
import { quantile } from "../report.ts";
import { oracleSchedule } from "./oracle-bound.ts";

/**
 * `capacity`: llmgw's law; `latency`: llm-d's formula with its HPA
 * behaviour; `static`: the maximum, fixed; `oracle`: each minute's load
 * known ahead (oracle-bound.ts), a reference no controller can reach.
 */
export type ControllerName = "capacity" | "latency" | "static" | "oracle";
/** The controllers run when none are named. */
export const CONTROLLERS: readonly ControllerName[] = ["capacity", "latency", "static"];
export const KNOWN_CONTROLLERS: readonly ControllerName[] = [...CONTROLLERS, "oracle"];

/**
 * Where the capacity law's prefill bound comes from: `profile`, the sim
 * profile's step-time model; `learned`, the per-replica prompt-token rate
 * at which TTFT crossed its guard; `none`, no bound (prompt tokens not
 * sampled).
 */
export type PrefillBound = "profile" | "learned" | "none";
export const PREFILL_BOUNDS: readonly PrefillBound[] = ["profile", "learned", "none"];
export const DEFAULT_PREFILL_BOUND: PrefillBound = "profile";

export interface AutoscaleWorkload {
  name: string;
  requests: readonly ScheduledRequest[];
  /** The sim-engine profile every replica runs. */
  profile: string;
  tensorParallel: number;
  gpuClass: string;
  slo: AutoscalePolicy["slo"];
  minReplicas: number;
  maxReplicas: number;
  /** Requests arriving before this (ms) warm the fleet up: not scored, and GPU time counts from here. */
  scoreFromMs: number;
}

export interface ControllerResult {
  controller: ControllerName;
  startup_s: number;
  /** A static fleet's size. */
  replicas?: number;
  /** The capacity law's prefill bound. */
  prefill_bound?: PrefillBound;
  requests: number;
  /** Requests that met both SLOs. */
  met: number;
  attainment: number;
  /** Requests not answered at all. */
  failed: number;
  /** Replicas placed and not leaving, averaged over the episode. */
  replicas_mean: number;
  gpu_hours: number;
  ttft_p_ms: number;
  tpot_p_ms: number;
  scale_ups: number;
  scale_downs: number;
  episode_s: number;
  wall_s: number;
  timeline: AutoscaleTimelinePoint[];
}

/** Requests still open this long after the last send are aborted (and fail their SLOs). */
const DRAIN_MS = 900_000;
/** GPUs per twin node (an 8-GPU H100 node, as llm-d's GKE nodes). */
const GPUS_PER_NODE = 8;
/** The twin's seed: the workload fixes the load, this the engines' and the gateway's own randomness. */
const TWIN_SEED = 1;

/** The policy each controller runs: llmgw's defaults, or llm-d's settings (15 s rules, 30 s up window, one pod per 120 s down, 180 s window). */
function controllerPolicy(c: Exclude<ControllerName, "static">, w: AutoscaleWorkload, targetUtilization: number, prefill: PrefillBound): AutoscalePolicy {
  const common = {
    ...(prefill === "profile" ? { promptTokensPerReplicaS: prefillTokensPerS(resolveProfile({ profile: w.profile }).profile) } : {}),
    minReplicas: w.minReplicas,
    maxReplicas: w.maxReplicas,
    slo: w.slo,
    intervalMs: DEFAULT_AUTOSCALE_INTERVAL_MS,
    scaleDownWindowMs: DEFAULT_SCALE_DOWN_WINDOW_MS,
    maxSurge: DEFAULT_MAX_SURGE,
    targetUtilization,
    startupMs: DEFAULT_STARTUP_MS,
  };
  return c === "capacity"
    ? { ...common, law: "capacity", scaleUpWindowMs: DEFAULT_SCALE_UP_WINDOW_MS, scaleDownEveryMs: DEFAULT_SCALE_DOWN_EVERY_MS }
    : { ...common, law: "latency", scaleUpWindowMs: 30_000, scaleDownEveryMs: 120_000 };
}

export async function runControllerTwin(
  controller: ControllerName,
  w: AutoscaleWorkload,
  o: { startupS: number; targetUtilization: number; prefillBound?: PrefillBound; stopped?: () => boolean; staticReplicas?: number },
): Promise<ControllerResult> {
  const prefillBound = o.prefillBound ?? DEFAULT_PREFILL_BOUND;
  const wall0 = performance.now();
  // The oracle plans against a static fleet's size (its replicas' share of the peak minute).
  const plan = controller === "oracle" ? oracleSchedule(w, o.staticReplicas ?? w.maxReplicas, o.startupS) : undefined;
  const initial = controller === "static" ? (o.staticReplicas ?? w.maxReplicas) : (plan?.(0) ?? w.minReplicas);
  const spec = toFleetModel(
    fleetModelSchema.parse({ name: w.name, engine: "sim", replicas: initial, tensor_parallel: w.tensorParallel, startup_ms: Math.round(o.startupS * 1000) }),
  );
  const nodes = { count: Math.ceil((w.maxReplicas * w.tensorParallel) / GPUS_PER_NODE), gpus: GPUS_PER_NODE, gpuClass: w.gpuClass };
  const fleet = new TwinFleet({
    engines: 0,
    model: w.name,
    engineFlags: ["--profile", w.profile],
    gateway: { log_level: "warn" },
    kvEvents: false,
    seed: TWIN_SEED,
    fleet: { spec, nodes },
  });
  const manager = fleet.manager!;
  const policy = controller === "static" || controller === "oracle" ? undefined : controllerPolicy(controller, w, o.targetUtilization, prefillBound);
  const lastSendMs = w.requests.at(-1)?.atMs ?? 0;
  const decider = policy ? new Autoscaler(policy) : plan ? scheduled(plan) : undefined;
  const scaler = new TwinAutoscaler(fleet, manager, w.slo, policy?.intervalMs ?? DEFAULT_AUTOSCALE_INTERVAL_MS, decider, {
    promptTokens: prefillBound !== "none",
  });
  scaler.start();
  if (w.scoreFromMs > 0) fleet.clock.at(w.scoreFromMs, () => manager.restartAccounting());
  const result = await runTwinOpenLoop(fleet, {
    requests: w.requests,
    drainMs: DRAIN_MS,
    observer: scaler,
    // The episode ends once the fleet is back at its floor after the load (or, should it never get there, when the drain ends).
    keepRunning: () => decider !== undefined && manager.counts().provisioned > w.minReplicas && fleet.clock.now < lastSendMs + DRAIN_MS,
    ...(o.stopped ? { stopped: o.stopped } : {}),
  });
  scaler.stop();
  const fleetReport = manager.report();
  const scored = result.records.filter((r) => r.atMs >= w.scoreFromMs);
  const answered = scored.filter((r) => r.ttftMs !== undefined);
  const met = scored.filter((r) => meets(r, w.slo)).length;
  const q = w.slo.percentile / 100;
  const changes = scaler.timeline.filter((p) => p.desired !== p.provisioned);
  return {
    controller,
    startup_s: o.startupS,
    ...(controller === "static" ? { replicas: initial } : {}),
    ...(controller === "capacity" ? { prefill_bound: prefillBound } : {}),
    requests: scored.length,
    met,
    attainment: scored.length > 0 ? met / scored.length : 0,
    failed: scored.filter((r) => r.status !== 200).length,
    replicas_mean: fleetReport.provisioned_mean,
    gpu_hours: fleetReport.gpu_hours,
    ttft_p_ms: round1(
      quantile(
        answered.map((r) => r.ttftMs!),
        q,
      ),
    ),
    tpot_p_ms: round1(
      quantile(
        answered.filter((r) => r.tpotMs !== undefined).map((r) => r.tpotMs!),
        q,
      ),
    ),
    scale_ups: changes.filter((p) => p.desired > p.provisioned).length,
    scale_downs: changes.filter((p) => p.desired < p.provisioned).length,
    episode_s: Math.round(fleet.clock.now / 100) / 10,
    wall_s: Math.round((performance.now() - wall0) / 100) / 10,
    timeline: scaler.timeline,
  };
}

/** A controller that sets what `plan` says for the time of each decision. */
function scheduled(plan: (atMs: number) => number): Pick<Autoscaler, "decide"> {
  return {
    decide: (s) => ({ at: s.at, current: s.provisioned, asked: plan(s.at), desired: plan(s.at), reason: "forecast", figures: {} }),
  };
}

function round1(v: number): number {
  return Math.round(v * 10) / 10;
}

/**
 * The smallest static fleet whose attainment is at least `attainment`
 * (binary search between the workload's bounds: attainment grows with the
 * count), with the runs it took; the maximum when none reaches it.
 */
export async function staticAtEqualAttainment(
  w: AutoscaleWorkload,
  attainment: number,
  o: { startupS: number; targetUtilization: number; stopped?: () => boolean },
): Promise<ControllerResult> {
  const tried = new Map<number, ControllerResult>();
  const at = async (n: number) => {
    let r = tried.get(n);
    if (!r) {
      r = await runControllerTwin("static", w, { ...o, staticReplicas: n });
      tried.set(n, r);
    }
    return r;
  };
  let lo = w.minReplicas;
  let hi = w.maxReplicas;
  while (lo < hi && !o.stopped?.()) {
    const mid = Math.floor((lo + hi) / 2);
    if ((await at(mid)).attainment >= attainment) hi = mid;
    else lo = mid + 1;
  }
  return at(hi);
}
