/**
 * Checks a replica spec against this node before anything is launched. Each
 * refusal is an LlmgwError VALIDATION_FAILED (HTTP 400) whose message starts
 * with the rule's name, so a person and the control plane both see which
 * rule said no.
 */
import { LlmgwError } from "../shared/errors.ts";
import type { Fabric, FabricPort } from "./fabric.ts";
import { computeCapabilityAtLeast } from "./gpu-class.ts";
import { BLOCKING_HEALTH_REASONS, type GpuView } from "./gpu-health.ts";
import type { ResolvedFabric } from "./nccl-env.ts";
import { worldSize, type ReplicaSpec } from "./replica-spec.ts";

export type ValidationRule =
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
  | "fabric-adapter"
  | "fabric-mixed-link-layer"
  | "roce-gid-index";

export interface OtherReplica {
  id: string;
  gpus: readonly number[];
  port: number | null;
}

export interface ValidationContext {
  gpus: readonly GpuView[];
  fabric: Fabric;
  /** The other replicas of this node (the one a PUT replaces is left out). */
  others: readonly OtherReplica[];
}

function refuse(rule: ValidationRule, message: string, param: string | null = null): never {
  throw new LlmgwError("VALIDATION_FAILED", `${rule}: ${message}`, { param });
}

/** fp8 weights need compute capability 8.9 (Ada, Hopper); below it engines silently fall back to a slower path. */
export function isFp8(quantization: string | undefined): boolean {
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
      refuse("fp8-compute-capability", `quantization '${spec.quantization}' needs compute capability ≥ 8.9; GPU ${detail} is below (refused rather than a silent fallback)`, "quantization");
    }
  }
  if (spec.startupMs !== undefined && spec.engine !== "sim") refuse("engine-option", "startupMs applies to the sim-engine only", "startupMs");
}

function resolveFabric(spec: ReplicaSpec, fabric: Fabric): ResolvedFabric | null {
  if (!spec.fabric) return null;
  const ports: { adapter: string; port: FabricPort }[] = [];
  for (const name of spec.fabric.adapters) {
    const adapter = fabric.adapters.find((a) => a.name === name);
    if (!adapter) refuse("fabric-adapter", `adapter '${name}' is not on this node (have: ${fabric.adapters.map((a) => a.name).join(", ") || "none"})`, "fabric.adapters");
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
  const chosen = validateGpus(spec, ctx);
  validateLayout(spec, chosen);
  if (spec.port !== undefined) {
    const holder = ctx.others.find((o) => o.port === spec.port);
    if (holder) refuse("port-in-use", `port ${spec.port} is already used by replica '${holder.id}'`, "port");
  }
  return resolveFabric(spec, ctx.fabric);
}
