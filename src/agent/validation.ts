/**
 * Checks a replica spec against this node before anything is launched. Each
 * refusal is an LlmgwError VALIDATION_FAILED (HTTP 400) whose message starts
 * with the rule's name, so a person and the control plane both see which
 * rule said no.
 */
import { LlmgwError } from "../shared/errors.ts";
import { computeCapabilityAtLeast } from "../shared/gpu-class.ts";
import { modelNameProblem, quotedName } from "../shared/model-name.ts";
import { OWNED_FLAGS } from "./engine-adapters.ts";
import type { Fabric, FabricPort } from "./fabric.ts";
import { BLOCKING_HEALTH_REASONS, type GpuView } from "./gpu-health.ts";
import type { ResolvedFabric } from "./nccl-env.ts";
import { type ReplicaSpec, worldSize } from "./replica-spec.ts";

type ValidationRule =
  | "gpus-required"
  | "gpu-exists"
  | "gpu-duplicate"
  | "gpu-in-use"
  | "gpu-unhealthy"
  | "parallel-arithmetic"
  | "mixed-gpu-types"
  | "fp8-compute-capability"
  | "multi-node"
  | "port-in-use"
  | "engine-option"
  | "model-name"
  | "engine-args"
  | "engine-env"
  | "fabric-adapter"
  | "fabric-mixed-link-layer"
  | "roce-gid-index";

export interface OtherReplica {
  id: string;
  gpus: readonly number[];
  port: number | null;
}

export interface ValidationContext {
  /** The agent's environment, where apiKeyEnv is looked up (process.env when absent). */
  env?: Readonly<Record<string, string | undefined>>;
  gpus: readonly GpuView[];
  fabric: Fabric;
  /** The other replicas of this node (the one a PUT replaces is left out). */
  others: readonly OtherReplica[];
}

function refuse(rule: ValidationRule, message: string, param: string | null = null): never {
  throw new LlmgwError("VALIDATION_FAILED", `${rule}: ${message}`, { param });
}

/** fp8 weights need compute capability 8.9 (Ada, Hopper); below it engines silently fall back to a slower path. */
function isFp8(quantization: string | undefined): boolean {
  return quantization !== undefined && /fp8/i.test(quantization);
}

function validateGpus(spec: ReplicaSpec, ctx: ValidationContext): GpuView[] {
  if (spec.engine !== "sim" && spec.gpus.length === 0) refuse("gpus-required", `engine ${spec.engine} needs at least one GPU`, "gpus");
  const seen = new Set<number>();
  const chosen: GpuView[] = [];
  for (const idx of spec.gpus) {
    if (seen.has(idx)) refuse("gpu-duplicate", `GPU ${idx} is listed twice`, "gpus");
    seen.add(idx);
    const gpu = ctx.gpus.find((g) => g.index === idx);
    if (!gpu) {
      const have = ctx.gpus.map((g) => g.index).join(", ") || "none";
      refuse("gpu-exists", `GPU ${idx} does not exist on this node (GPUs: ${have})`, "gpus");
    }
    const holder = ctx.others.find((o) => o.gpus.includes(idx));
    if (holder) refuse("gpu-in-use", `GPU ${idx} is already used by replica '${holder.id}'`, "gpus");
    const blocking = gpu.health.reasons.filter((r) => BLOCKING_HEALTH_REASONS.includes(r));
    if (blocking.length > 0) refuse("gpu-unhealthy", `GPU ${idx} is not usable (${blocking.join(", ")})`, "gpus");
    chosen.push(gpu);
  }
  return chosen;
}

function validateLayout(spec: ReplicaSpec, chosen: readonly GpuView[]): void {
  const nnodes = spec.multiNode?.nnodes ?? 1;
  if (spec.multiNode) {
    if (spec.engine === "sim") refuse("engine-option", "the sim-engine runs on one node", "multiNode");
    if (spec.multiNode.nodeRank >= nnodes) refuse("multi-node", `nodeRank ${spec.multiNode.nodeRank} is not below nnodes ${nnodes}`, "multiNode.nodeRank");
  }
  if (spec.engine !== "sim" || chosen.length > 0) {
    const total = chosen.length * nnodes;
    if (total !== worldSize(spec)) {
      refuse(
        "parallel-arithmetic",
        `${nnodes} node(s) × ${chosen.length} GPU(s) = ${total}, but tensorParallel ${spec.tensorParallel} × pipelineParallel ${spec.pipelineParallel} = ${worldSize(spec)}`,
        "gpus",
      );
    }
  }
  const classes = [...new Set(chosen.map((g) => g.class))];
  if (classes.length > 1) {
    const detail = chosen.map((g) => `${g.index}=${g.class}`).join(", ");
    refuse("mixed-gpu-types", `a tensor-parallel group needs one GPU type, got ${detail}`, "gpus");
  }
  if (isFp8(spec.quantization)) {
    const weak = chosen.filter((g) => !computeCapabilityAtLeast(g.computeCapability ?? undefined, 8, 9));
    if (weak.length > 0) {
      const detail = weak.map((g) => `${g.index} (${g.computeCapability ?? "unknown"})`).join(", ");
      refuse(
        "fp8-compute-capability",
        `quantization '${spec.quantization}' needs compute capability ≥ 8.9; GPU ${detail} is below (refused rather than a silent fallback)`,
        "quantization",
      );
    }
  }
  if (spec.startupMs !== undefined && spec.engine !== "sim") refuse("engine-option", "startupMs applies to the sim-engine only", "startupMs");
}

/** C0 controls and DEL: never part of a model name or an argument a person meant. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this matches
const CONTROL_CHAR = /[\u0000-\u001f\u007f]/;
/** Environment the agent sets to pin the GPU assignment and the engine's parent binding. */
const OWNED_ENV = ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES"];

/** A value placed in the engine's argv must never read as a flag (a model named `--port`). */
function checkArgValue(rule: ValidationRule, param: string, value: string | undefined): void {
  if (value === undefined) return;
  if (value.startsWith("-")) refuse(rule, `${param} '${value}' starts with '-' and would be read as a flag`, param);
  if (CONTROL_CHAR.test(value) || value.trim() !== value) refuse(rule, `${param} contains control characters or surrounding whitespace`, param);
}

/** The flag an extraArgs token names, normalised as argparse reads it (`--max_num_seqs=8` → `--max-num-seqs`); null for a value. */
function flagName(token: string): string | null {
  if (!token.startsWith("-") || /^-\d/.test(token)) return null; // -1, -0.5: negative numbers are values
  const name = token.split("=", 1)[0]!;
  return name.startsWith("--") ? `--${name.slice(2).replaceAll("_", "-")}` : name;
}

/** argparse accepts unique prefixes (`--por` for `--port`) and glued short values (`-tp8`). */
function ownedFlagHit(flag: string, owned: readonly string[]): string | undefined {
  if (flag.startsWith("--")) return owned.find((o) => o.startsWith("--") && flag.length > 2 && o.startsWith(flag));
  return owned.find((o) => !o.startsWith("--") && flag.startsWith(o));
}

function validateEngineInputs(spec: ReplicaSpec): void {
  checkArgValue("model-name", "model", spec.model);
  // The engine lists this name in /v1/models, and the gateway routes by it: the gateway's rule for names.
  const problem = modelNameProblem(spec.model);
  if (problem !== undefined) refuse("model-name", `model ${quotedName(spec.model)} ${problem}`, "model");
  checkArgValue("engine-option", "quantization", spec.quantization);
  checkArgValue("multi-node", "multiNode.masterAddr", spec.multiNode?.masterAddr);
  const first = spec.extraArgs[0];
  if (first !== undefined && flagName(first) === null)
    refuse("engine-args", `extraArgs[0] '${first}' is not a flag (extraArgs are flags and their values)`, "extraArgs");
  spec.extraArgs.forEach((arg, i) => {
    if (CONTROL_CHAR.test(arg)) refuse("engine-args", `extraArgs[${i}] contains a control character`, "extraArgs");
    const flag = flagName(arg);
    const hit = flag === null ? undefined : ownedFlagHit(flag, OWNED_FLAGS[spec.engine]);
    if (hit)
      refuse(
        "engine-args",
        `extraArgs[${i}] '${arg}' sets ${hit}, which the agent sets from the spec (host, port, model and GPU layout are the agent's)`,
        "extraArgs",
      );
  });
  for (const key of Object.keys(spec.env)) {
    if (OWNED_ENV.includes(key) || key.startsWith("LLMGW_")) refuse("engine-env", `env ${key} is set by the agent (GPU assignment, parent binding)`, "env");
  }
  // The key travels by name only: spelled out in argv or env it would sit in the process list, the pid file and the log.
  const keyFlag = spec.extraArgs.findIndex((a) => flagName(a) === "--api-key");
  if (keyFlag >= 0) refuse("engine-args", `extraArgs[${keyFlag}] sets --api-key: name the variable holding the key in apiKeyEnv instead`, "extraArgs");
  if (Object.hasOwn(spec.env, "VLLM_API_KEY")) refuse("engine-env", "env VLLM_API_KEY: name the variable holding the key in apiKeyEnv instead", "env");
  if (spec.lora) {
    // SGLang loads adapters through its own API and flags; the agent speaks vLLM's.
    if (spec.engine === "sglang") refuse("engine-option", "lora: run-time LoRA adapters are supported on vllm and sim replicas", "lora");
    spec.extraArgs.forEach((arg, i) => {
      const flag = flagName(arg);
      const hit = flag === null ? undefined : ownedFlagHit(flag, LORA_FLAGS);
      if (hit) refuse("engine-args", `extraArgs[${i}] '${arg}' sets ${hit}, which the agent sets from lora`, "extraArgs");
    });
    if (spec.lora.maxCpuLoras !== undefined && spec.lora.maxCpuLoras < spec.lora.maxLoras)
      refuse("engine-option", `lora.maxCpuLoras (${spec.lora.maxCpuLoras}) must be at least lora.maxLoras (${spec.lora.maxLoras})`, "lora");
  }
}

/** Flags `lora` sets (extraArgs may not set them again). */
const LORA_FLAGS: readonly string[] = ["--enable-lora", "--max-loras", "--max-lora-rank", "--max-cpu-loras"];

function resolveFabric(spec: ReplicaSpec, fabric: Fabric): ResolvedFabric | null {
  if (!spec.fabric) return null;
  const ports: { adapter: string; port: FabricPort }[] = [];
  for (const name of spec.fabric.adapters) {
    const adapter = fabric.adapters.find((a) => a.name === name);
    if (!adapter)
      refuse("fabric-adapter", `adapter '${name}' is not on this node (have: ${fabric.adapters.map((a) => a.name).join(", ") || "none"})`, "fabric.adapters");
    const active = adapter.ports.filter((p) => p.active && p.transport !== "other");
    if (active.length === 0) refuse("fabric-adapter", `adapter '${name}' has no ACTIVE InfiniBand or RoCE port`, "fabric.adapters");
    for (const p of active) ports.push({ adapter: name, port: p });
  }
  const transports = [...new Set(ports.map((p) => p.port.transport))];
  if (transports.length > 1) refuse("fabric-mixed-link-layer", "adapters mix InfiniBand and RoCE (Ethernet) ports", "fabric.adapters");
  const transport = transports[0] === "roce" ? "roce" : "ib";
  if (transport === "roce") {
    const gids = [...new Set(ports.map((p) => p.port.roceGidIndex))];
    if (gids.includes(null)) refuse("roce-gid-index", "a RoCE port has no RoCE v2 GID", "fabric.adapters");
    if (gids.length > 1) refuse("roce-gid-index", `RoCE ports need one NCCL_IB_GID_INDEX, found ${gids.join(", ")}`, "fabric.adapters");
  }
  return {
    transport,
    ports: ports.map((p) => ({
      adapter: p.adapter,
      port: p.port.port,
      gidIndex: p.port.roceGidIndex,
      netdev: p.port.gids.find((g) => g.index === p.port.roceGidIndex)?.netdev ?? null,
    })),
    socketIfname: spec.fabric.socketIfname,
  };
}

/** Validate `spec` for this node; returns the fabric ports NCCL should use (null: none asked for). */
export function validateReplica(spec: ReplicaSpec, ctx: ValidationContext): ResolvedFabric | null {
  validateEngineInputs(spec);
  if (spec.apiKeyEnv !== undefined) {
    if (spec.engine === "sglang")
      refuse("engine-option", "apiKeyEnv: SGLang takes its key on the command line only; vllm and sim replicas take one", "apiKeyEnv");
    if (!(ctx.env ?? process.env)[spec.apiKeyEnv]?.trim())
      refuse("engine-env", `apiKeyEnv: environment variable ${spec.apiKeyEnv} is not set or empty on this node's agent`, "apiKeyEnv");
  }
  const chosen = validateGpus(spec, ctx);
  validateLayout(spec, chosen);
  if (spec.port !== undefined) {
    const holder = ctx.others.find((o) => o.port === spec.port);
    if (holder) refuse("port-in-use", `port ${spec.port} is already used by replica '${holder.id}'`, "port");
  }
  return resolveFabric(spec, ctx.fabric);
}
