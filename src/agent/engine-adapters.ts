/**
 * Engine adapters: pure functions from a validated spec to the argv and
 * environment of the engine process. No process handling here.
 * Flags: vLLM `vllm serve` (multi-node with the multiprocessing backend:
 * `--nnodes --node-rank --master-addr [--master-port]`, `--headless` on
 * ranks other than 0, per vLLM's distributed serving docs); SGLang
 * `python -m sglang.launch_server` (`--tp` counts GPUs across nodes,
 * `--dist-init-addr host:port`); the bundled sim-engine through `src/cli.ts`.
 * vLLM and the sim-engine publish KV-cache events on ports the agent
 * allocates (`--kv-events-config`), so the gateway can index them.
 */
import { ncclEnv, type ResolvedFabric } from "./nccl-env.ts";
import type { EngineKind, ReplicaSpec } from "./replica-spec.ts";

/** SGLang needs host:port for --dist-init-addr; torch.distributed's customary port when none is given. */
const DEFAULT_SGLANG_DIST_PORT = 29500;

export interface EngineBinaries {
  /** The `vllm` executable. */
  vllm: string;
  /** Python with sglang installed. */
  python: string;
  /** Bun (process.execPath) and the repo's src/cli.ts, for the sim-engine. */
  bun: string;
  cli: string;
}

/** Where the engine publishes its KV-cache events: the ports the agent allocated (bound on every interface, as vLLM binds a wildcard). */
export interface KvEventsPorts {
  port: number;
  replayPort: number;
  topic: string;
}

export interface LaunchInput {
  spec: ReplicaSpec;
  /** Publish KV-cache events on these ports (vLLM and the sim-engine); absent: none. */
  kvEvents?: KvEventsPorts;
  /** The port the engine serves its OpenAI API on (resolved: spec.port or an auto-assigned one). */
  port: number;
  /** Interface the engine binds. */
  host: string;
  fabric: ResolvedFabric | null;
  bins: EngineBinaries;
}

export interface LaunchPlan {
  argv: string[];
  /** Added to the agent's environment for the engine. */
  env: Record<string, string>;
}

function opt(flag: string, value: string | number | undefined): string[] {
  return value === undefined ? [] : [flag, String(value)];
}

/**
 * vLLM's --kv-events-config (vllm/config/kv_events.py): PUB and replay
 * ROUTER on the allocated ports. A wildcard endpoint makes vLLM bind (any
 * other it would connect to); the sim-engine takes the same flag.
 */
function kvEventsConfigArg(k: KvEventsPorts): string {
  return JSON.stringify({
    enable_kv_cache_events: true,
    publisher: "zmq",
    endpoint: `tcp://*:${k.port}`,
    replay_endpoint: `tcp://*:${k.replayPort}`,
    topic: k.topic,
  });
}

function kvEventsFlag(input: LaunchInput): string[] {
  return input.kvEvents === undefined ? [] : ["--kv-events-config", kvEventsConfigArg(input.kvEvents)];
}

/** vLLM's LoRA flags (vllm/engine/arg_utils.py), the same for the sim-engine; adapters come at run time. */
function loraArgs(spec: ReplicaSpec): string[] {
  const l = spec.lora;
  if (!l) return [];
  return ["--enable-lora", "--max-loras", String(l.maxLoras), ...opt("--max-lora-rank", l.maxLoraRank), ...opt("--max-cpu-loras", l.maxCpuLoras)];
}

function vllmArgv(input: LaunchInput): string[] {
  const { spec } = input;
  const mn = spec.multiNode;
  return [
    input.bins.vllm,
    "serve",
    spec.model,
    "--host",
    input.host,
    "--port",
    String(input.port),
    "--tensor-parallel-size",
    String(spec.tensorParallel),
    "--pipeline-parallel-size",
    String(spec.pipelineParallel),
    ...opt("--max-num-seqs", spec.maxNumSeqs),
    ...opt("--gpu-memory-utilization", spec.gpuMemoryUtilization),
    ...opt("--quantization", spec.quantization),
    ...loraArgs(spec),
    ...(mn && mn.nnodes > 1
      ? [
          ...opt("--nnodes", mn.nnodes),
          ...opt("--node-rank", mn.nodeRank),
          ...opt("--master-addr", mn.masterAddr),
          ...opt("--master-port", mn.masterPort),
          ...(mn.nodeRank > 0 ? ["--headless"] : []),
        ]
      : []),
    ...kvEventsFlag(input),
    ...spec.extraArgs,
  ];
}

function sglangArgv(input: LaunchInput): string[] {
  const { spec } = input;
  const mn = spec.multiNode;
  return [
    input.bins.python,
    "-m",
    "sglang.launch_server",
    "--model-path",
    spec.model,
    "--host",
    input.host,
    "--port",
    String(input.port),
    "--tp",
    String(spec.tensorParallel),
    ...(spec.pipelineParallel > 1 ? ["--pp-size", String(spec.pipelineParallel)] : []),
    ...opt("--max-running-requests", spec.maxNumSeqs),
    ...opt("--mem-fraction-static", spec.gpuMemoryUtilization),
    ...opt("--quantization", spec.quantization),
    ...(mn && mn.nnodes > 1
      ? ["--nnodes", String(mn.nnodes), "--node-rank", String(mn.nodeRank), "--dist-init-addr", `${mn.masterAddr}:${mn.masterPort ?? DEFAULT_SGLANG_DIST_PORT}`]
      : []),
    ...spec.extraArgs,
  ];
}

function simArgv(input: LaunchInput): string[] {
  const { spec } = input;
  return [
    input.bins.bun,
    input.bins.cli,
    "sim-engine",
    "--host",
    input.host,
    "--port",
    String(input.port),
    "--model",
    spec.model,
    ...opt("--startup-ms", spec.startupMs),
    ...(spec.gpus.length > 0 ? ["--gpus", String(spec.gpus.length)] : []),
    ...kvEventsFlag(input),
    ...loraArgs(spec),
    ...spec.extraArgs,
  ];
}

/**
 * Flags the agent writes itself or whose meaning it relies on (where the
 * engine listens, which model, how many GPUs and nodes): extraArgs may not
 * set them, so the probe, the port and the GPU assignment stay true. Short
 * forms are vLLM's aliases.
 */
export const OWNED_FLAGS: Record<EngineKind, readonly string[]> = {
  vllm: [
    "--model",
    "--host",
    "--port",
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "-pp",
    "--data-parallel-size",
    "-dp",
    "--max-num-seqs",
    "--gpu-memory-utilization",
    "--quantization",
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--headless",
    "--kv-events-config",
  ],
  sglang: [
    "--model-path",
    "--model",
    "--host",
    "--port",
    "--tp",
    "--tp-size",
    "--tensor-parallel-size",
    "--pp-size",
    "--pipeline-parallel-size",
    "--dp",
    "--dp-size",
    "--data-parallel-size",
    "--max-running-requests",
    "--mem-fraction-static",
    "--quantization",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
  ],
  sim: ["--model", "--host", "--port", "--startup-ms", "--gpus", "--kv-events-config"],
};

const ARGV: Record<EngineKind, (input: LaunchInput) => string[]> = { vllm: vllmArgv, sglang: sglangArgv, sim: simArgv };

export function buildLaunchPlan(input: LaunchInput): LaunchPlan {
  const env: Record<string, string> = { ...ncclEnv(input.fabric) };
  // Empty string hides every GPU; an engine given no GPUs must not grab GPU 0 by default.
  env.CUDA_VISIBLE_DEVICES = input.spec.gpus.join(",");
  // Indices must mean what nvidia-smi says they mean (CUDA orders fastest-first by default).
  env.CUDA_DEVICE_ORDER = "PCI_BUS_ID";
  // The fleet loads and unloads adapters at run time: vLLM's /v1/load_lora_adapter exists only with this set (vllm/envs.py).
  if (input.spec.lora) env.VLLM_ALLOW_RUNTIME_LORA_UPDATING = "True";
  Object.assign(env, input.spec.env);
  return { argv: ARGV[input.spec.engine](input), env };
}
