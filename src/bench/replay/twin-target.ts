/**
 * `bench replay --twin`: the window replayed in the fleet twin (src/twin/)
 * instead of onto processes — the same engines' flags, the same gateway
 * config, the same schedule — and each endpoint's row with its engine's
 * own counters, as the real-time target reads them from /metrics.
 */
import { fleetModelSchema, toFleetModel } from "../../config/fleet-schema.ts";
import { UsageError } from "../../shared/flags.ts";
import { TwinFleet } from "../../twin/twin-fleet.ts";
import { twinFailures } from "../twin-faults.ts";
import type { OpenLoopProgress, OpenLoopResult, ScheduledRequest } from "./open-loop-driver.ts";
import type { EndpointReport, ReplayReport } from "./replay-report.ts";
import { type FleetTarget, MODEL, readGatewayConfig } from "./replay-target.ts";
import type { EndpointLoad } from "./summary.ts";
import { runTwinOpenLoop } from "./twin-open-loop.ts";

/** The desired model of a twin fleet of nodes: the bench's one model, `replicas` of `tensorParallel` GPUs, each starting up for `startupMs`. */
function fleetSpec(replicas: number, tensorParallel: number, startupMs: number) {
  return toFleetModel(fleetModelSchema.parse({ name: MODEL, engine: "sim", replicas, tensor_parallel: tensorParallel, startup_ms: startupMs }));
}

/** The twin's seed: the trace fixes the load, this the engines' and the gateway's own randomness. */
const TWIN_SEED = 1;

interface TwinReplay {
  result: OpenLoopResult;
  model: string;
  endpoints(loads: EndpointLoad[]): EndpointReport[];
  settings: Partial<ReplayReport>;
}

export async function replayInTwin(
  t: FleetTarget,
  engineDefaults: readonly string[],
  requests: readonly ScheduledRequest[],
  drainMs: number,
  onProgress: (p: OpenLoopProgress) => void,
  stopped: () => boolean,
): Promise<TwinReplay> {
  const engineArgs = [...engineDefaults, ...t.engineArgs];
  const gateway = t.gatewayConfigPath === undefined ? {} : readGatewayConfig(t.gatewayConfigPath);
  let fleet: TwinFleet;
  try {
    fleet = new TwinFleet({
      engines: t.engines,
      model: MODEL,
      engineFlags: engineArgs,
      gateway,
      kvEvents: false,
      seed: TWIN_SEED,
      ...(t.fleet ? { fleet: { spec: fleetSpec(t.engines, t.fleet.tensorParallel, t.fleet.startupMs), nodes: t.fleet.nodes } } : {}),
    });
  } catch (err) {
    const where = t.gatewayConfigPath === undefined ? "" : `--gateway-config ${t.gatewayConfigPath}: `;
    throw new UsageError(`${where}${err instanceof Error ? err.message : String(err)}`);
  }
  const faults = t.faults ?? [];
  const result = await runTwinOpenLoop(fleet, { requests, drainMs, onProgress, stopped, ...(faults.length > 0 ? { faults } : {}) });
  return {
    result,
    model: MODEL,
    endpoints: (loads) =>
      fleet.engines.map((e) => {
        const load = loads.find((l) => l.id === e.id) ?? { id: e.id, requests: 0, errors: 0, prompt_tokens: 0, output_tokens: 0 };
        const st = e.core.stats;
        return {
          ...load,
          engine: {
            prefix_cache_hit_tokens: st.prefixHits,
            ...(st.prefixQueries > 0 ? { prefix_cache_hit_rate: st.prefixHits / st.prefixQueries } : {}),
          },
        };
      }),
    settings: {
      ...(faults.length > 0 ? { failures: twinFailures(result) } : {}),
      ...(fleet.manager ? { fleet: fleet.manager.report() } : {}),
      engines: t.engines,
      engine_args: engineArgs,
      ...(t.gatewayConfigPath === undefined ? {} : { gateway_config: t.gatewayConfigPath }),
    },
  };
}
