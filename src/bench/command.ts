/**
 * `llmgw bench <scenario>`: runs one benchmark scenario over real processes on
 * loopback and prints a table (or one JSON object with --json). Each scenario
 * lives in its own module, loaded on demand.
 */
import { type CommandSpec, parseCommandArgs, UsageError } from "../shared/flags.ts";
import type { BenchScenario } from "./scenario.ts";

const SCENARIOS: Record<string, { summary: string; load: () => Promise<BenchScenario> }> = {
  sim: { summary: "concurrent streams one sim-engine sustains, and at what CPU cost", load: async () => (await import("./sim-scenario.ts")).simScenario },
  overhead: {
    summary: "latency and CPU llmgw adds: direct vs nginx vs bare Bun vs llmgw, interleaved",
    load: async () => (await import("./overhead-scenario.ts")).overheadScenario,
  },
  scale: { summary: "10,000 open streams through one gateway: memory per stream", load: async () => (await import("./scale-scenario.ts")).scaleScenario },
  admission: {
    summary: "platinum TTFT under bronze load, admission on and off",
    load: async () => (await import("./admission-scenario.ts")).admissionScenario,
  },
  batch: {
    summary: "interactive TTFT while batch work is shed under GPU saturation; batch lines/s before, during, after",
    load: async () => (await import("./batch-scenario.ts")).batchScenario,
  },
  chaos: {
    summary: "one of 2-3 sim-engines killed and restarted under streaming load: streams intact, recovered, failed",
    load: async () => (await import("./chaos-scenario.ts")).chaosScenario,
  },
  fleet: {
    summary: "a fleet model scaled 1 → 4 → 1 under streaming load: time to ready, requests per replica, errors",
    load: async () => (await import("./fleet-scenario.ts")).fleetScenario,
  },
  calibrate: {
    summary: "the sim-engine against published vLLM sweeps: per point, published vs sim and the error",
    load: async () => (await import("./calibrate-scenario.ts")).calibrateScenario,
  },
  replay: {
    summary:
      "a production trace (Azure 2023, Mooncake) replayed open-loop onto sim-engines behind llmgw or any OpenAI-compatible server: TTFT/TPOT/ITL/E2EL, goodput, per-endpoint load",
    load: async () => (await import("./replay-scenario.ts")).replayScenario,
  },
  lora: {
    summary: "LoRA adapters under skewed popularity: adapter loads per 1,000 requests, TTFT p90, tokens/s — llmgw vs load-only vs random",
    load: async () => (await import("./lora-scenario.ts")).loraScenario,
  },
  routing: {
    summary: "llm-d's 37-capacity routing experiment, scaled: every routing policy on the same schedule, the published rows beside it",
    load: async () => (await import("./routing-scenario.ts")).routingScenario,
  },
  autoscale: {
    summary: "SLO-driven autoscaling on llm-d's published ramp in the fleet twin: attainment against average replicas, per controller",
    load: async () => (await import("./autoscale-scenario.ts")).autoscaleScenario,
  },
  cluster: {
    summary: "1 vs 3 gateways, embedded vs sharing Redis: CPU per request, Redis commands per request, quota error",
    load: async () => (await import("./cluster-scenario.ts")).clusterScenario,
  },
};

function usage(): string {
  const lines = Object.entries(SCENARIOS).map(([n, s]) => `  ${n.padEnd(10)}  ${s.summary}`);
  return ["usage: llmgw bench <scenario> [flags] [--json]", "", "scenarios:", ...lines, "", "Run 'llmgw bench <scenario> --help' for its flags."].join("\n");
}

export const benchCommand: CommandSpec = {
  name: "bench",
  summary: "run a benchmark scenario and print a report",
  usage: usage(),
  options: {},
  allowPositionals: true,
  async run() {
    return 2; // dispatch() handles bench: each scenario has flags of its own
  },
  dispatch: runBench,
};

/** `bench routing --workload W`: the routing benchmark's workloads, each a scenario with flags of its own. */
const ROUTING_WORKLOADS: Record<string, string> = { "shared-prefix": "routing", lora: "lora" };

/** The scenario `bench routing --workload W` names, and the flags without it; any other scenario as given. */
function routingWorkload(name: string, rest: string[]): [string, string[]] {
  if (name !== "routing") return [name, rest];
  const at = rest.findIndex((a) => a === "--workload" || a.startsWith("--workload="));
  if (at < 0) return [name, rest];
  const value = rest[at]!.includes("=") ? rest[at]!.slice("--workload=".length) : rest[at + 1];
  const target = value === undefined ? undefined : ROUTING_WORKLOADS[value];
  if (target === undefined)
    throw new UsageError(`--workload: expected one of ${Object.keys(ROUTING_WORKLOADS).join(", ")}, got ${value === undefined ? "nothing" : `'${value}'`}`);
  return [target, [...rest.slice(0, at), ...rest.slice(at + (rest[at]!.includes("=") ? 1 : 2))]];
}

/** Scenario dispatch with the scenario's own strict flags. */
async function runBench(argv: string[]): Promise<number> {
  const [given, ...flags] = argv;
  const [name, rest] = given === undefined ? [given, flags] : routingWorkload(given, flags);
  if (name === undefined || name === "--help" || name === "-h") {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  const entry = SCENARIOS[name];
  if (!entry) throw new UsageError(`unknown scenario '${name}'`);
  const scenario = await entry.load();
  const spec: CommandSpec = {
    name: `bench ${name}`,
    summary: scenario.summary,
    usage: scenario.usage,
    options: { ...scenario.options, json: { type: "boolean" } },
    run: scenario.run,
  };
  const args = parseCommandArgs(spec, rest);
  if (args.values.help === true) {
    console.log(scenario.usage);
    return 0;
  }
  return await scenario.run(args);
}
