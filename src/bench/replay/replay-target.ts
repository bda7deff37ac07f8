/**
 * Where `bench replay` sends its load: sim-engines behind an llmgw gateway
 * it starts (and whose counters it reads after), or a server named by
 * --base-url, for which nothing is started.
 */
import { parse as parseYaml } from "yaml";
import { UsageError } from "../../shared/flags.ts";
import type { TwinFault } from "../../twin/faults.ts";
import type { TwinNodes } from "../../twin/twin-fleet-manager.ts";
import { MAX_CONFIG_FILE_BYTES, readInputFile } from "../input-file.ts";
import { engineCounters, type SimEngine, startSimFleet } from "../sim-fleet.ts";
import type { EndpointReport, ReplayReport } from "./replay-report.ts";
import { authHeaders, firstServedModel } from "./server-target.ts";
import type { EndpointLoad } from "./summary.ts";

/** The one model the bench's own fleet serves. */
export const MODEL = "replay-model";

/** Sim-engines behind llmgw, which the bench starts: as processes, or in the fleet twin. */
export interface FleetTarget {
  kind: "llmgw" | "twin";
  engines: number;
  /** Passed to every sim-engine after the bench's own flags (so they win). */
  engineArgs: string[];
  gatewayConfigPath?: string;
  /** Twin only: faults scheduled in the run. */
  faults?: readonly TwinFault[];
  /** Twin only: `engines` replicas placed on these nodes by the fleet manager's planner, each starting up for `startupMs`. */
  fleet?: { nodes: TwinNodes; tensorParallel: number; startupMs: number };
}

/** Where the replay goes: a fleet the bench starts, or a server it is pointed at. */
export type ReplayTarget =
  | FleetTarget
  | {
      kind: "base-url";
      /** The server's root (serverRoot): /v1/completions is appended. */
      root: string;
      apiKey?: string;
      /** The model to name; else the first the server lists. */
      model?: string;
    };

export function readGatewayConfig(path: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = parseYaml(readInputFile(path, MAX_CONFIG_FILE_BYTES, "--gateway-config"));
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`--gateway-config ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new UsageError(`--gateway-config ${path}: expected a YAML mapping`);
  return v as Record<string, unknown>;
}

/** What a run sends to: the completions URL, the model, the headers kept off disk, the endpoints' rows after it, how to stop it. */
interface StartedTarget {
  url: string;
  model: string;
  secretHeaders: Record<string, string>;
  endpoints(summary: EndpointLoad[]): Promise<EndpointReport[]>;
  settings: Partial<ReplayReport>;
  /** The sim-engines' API URLs (none for a server the bench was pointed at): their clocks are read around the run. */
  engineUrls: string[];
  /** The bench's own fleet: its engines (a fault may kill and restart one), the gateway's admin URL, the engines' flags. */
  fleet?: { engines: SimEngine[]; adminUrl: string; model: string; engineArgs: readonly string[] };
  stop(): Promise<void>;
}

/** Start what `t` needs (nothing for a server) and say where to send; `engineDefaults` go before --engine-args. */
export async function startTarget(t: Exclude<ReplayTarget, { kind: "twin" }>, engineDefaults: readonly string[]): Promise<StartedTarget> {
  if (t.kind === "base-url") {
    const headers = authHeaders(t.apiKey);
    const model = t.model ?? (await firstServedModel(t.root, headers));
    return {
      url: `${t.root}/v1/completions`,
      model,
      secretHeaders: headers,
      endpoints: async (e) => e,
      settings: { base_url: t.root },
      engineUrls: [],
      stop: async () => {},
    };
  }
  const engineArgs = [...engineDefaults, ...t.engineArgs];
  const gatewayConfig = t.gatewayConfigPath === undefined ? {} : readGatewayConfig(t.gatewayConfigPath);
  const fleet = await startSimFleet({ engines: t.engines, model: MODEL, engineArgs, gatewayConfig }).catch((err: unknown) => {
    throw err instanceof UsageError && t.gatewayConfigPath !== undefined && err.message.startsWith("the gateway refused")
      ? new UsageError(`--gateway-config ${t.gatewayConfigPath}: ${err.message}`)
      : err;
  });
  return {
    url: `${fleet.gateway.api}/v1/completions`,
    model: MODEL,
    secretHeaders: {},
    endpoints: (e) => withEngineCounters(fleet.engines, e),
    settings: {
      engines: t.engines,
      engine_args: engineArgs,
      ...(t.gatewayConfigPath === undefined ? {} : { gateway_config: t.gatewayConfigPath }),
    },
    engineUrls: fleet.engines.map((e) => e.url),
    fleet: { engines: fleet.engines, adminUrl: fleet.gateway.admin, model: MODEL, engineArgs },
    stop: () => fleet.stop(),
  };
}

/** Each endpoint's load with its engine's own counters; an engine the gateway sent nothing to is a row too (0 requests says something about routing). */
async function withEngineCounters(engines: readonly { id: string; url: string }[], loads: EndpointLoad[]): Promise<EndpointReport[]> {
  // An engine a fault killed (and did not start again) answers nothing: its row has no counters.
  const counters = await Promise.all(engines.map(async (e) => ({ id: e.id, c: await engineCounters(e.url).catch(() => undefined) })));
  const unused = engines
    .filter((e) => !loads.some((x) => x.id === e.id))
    .map((e) => ({ id: e.id, requests: 0, errors: 0, prompt_tokens: 0, output_tokens: 0 }));
  return [...loads, ...unused].map((e) => {
    const c = counters.find((x) => x.id === e.id)?.c;
    if (!c) return e;
    const hitRate =
      c.prefixCacheQueries !== undefined && c.prefixCacheQueries > 0 && c.prefixCacheHits !== undefined ? c.prefixCacheHits / c.prefixCacheQueries : undefined;
    return {
      ...e,
      engine: {
        requests: c.requests,
        prompt_tokens: c.promptTokens,
        generation_tokens: c.generationTokens,
        prefix_cache_hit_tokens: c.prefixCacheHits,
        prefix_cache_hit_rate: hitRate,
      },
    };
  });
}
