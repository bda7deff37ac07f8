/**
 * The sim-engine's LoRA flags, as vLLM takes them (vllm/engine/arg_utils.py,
 * vllm/config/lora.py, vllm/entrypoints/openai/cli_args.py): `--enable-lora`,
 * `--lora-modules` (`name=path`, or vLLM's JSON form
 * `{"name","path","base_model_name"}`, several after one flag or one per
 * flag), `--max-loras` (GPU slots, default 1), `--max-lora-rank` (default 16),
 * `--max-cpu-loras` (host-memory LRU, default max_loras), and
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING for the load/unload routes. Pure.
 */

import type { ModelArch } from "../profiles/model-arch.ts";
import { type AdapterCostModel, adapterCostModel } from "./load-cost.ts";

export const DEFAULT_MAX_LORAS = 1;
export const DEFAULT_MAX_LORA_RANK = 16;
/** vLLM's accepted `max_lora_rank` values (LoRAConfig). */
const LORA_RANKS: readonly number[] = [1, 8, 16, 32, 64, 128, 256, 320, 512];

export interface LoraModuleSpec {
  name: string;
  path: string;
  /** The adapter's parent in /v1/models when it names a served model (else the first served name). */
  baseModelName?: string;
}

export interface SimLoraSettings {
  maxLoras: number;
  maxLoraRank: number;
  maxCpuLoras: number;
  /** Loaded at start (--lora-modules). */
  modules: readonly LoraModuleSpec[];
  /** VLLM_ALLOW_RUNTIME_LORA_UPDATING: /v1/load_lora_adapter and /v1/unload_lora_adapter exist. */
  runtimeUpdates: boolean;
  cost: AdapterCostModel;
}

export class LoraConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LoraConfigError";
  }
}

/** vllm/envs.py: "1" or "true", case and surrounding blanks ignored. */
export function runtimeLoraUpdatesAllowed(env: Record<string, string | undefined>): boolean {
  const v = (env.VLLM_ALLOW_RUNTIME_LORA_UPDATING ?? "0").trim().toLowerCase();
  return v === "1" || v === "true";
}

/** One --lora-modules item: `name=path` when it has '=' and no ',', else vLLM's JSON form. */
export function parseLoraModule(item: string): LoraModuleSpec {
  if (item.includes("=") && !item.includes(",")) {
    const parts = item.split("=");
    if (parts.length !== 2 || parts[0] === "" || parts[1] === "") throw new LoraConfigError(`--lora-modules: expected name=path, got '${item}'`);
    return { name: parts[0]!, path: parts[1]! };
  }
  let v: unknown;
  try {
    v = JSON.parse(item);
  } catch {
    throw new LoraConfigError(`Invalid JSON format for --lora-modules: ${item}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new LoraConfigError(`Invalid fields for --lora-modules: ${item} - expected an object with name and path`);
  const o = v as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => k !== "name" && k !== "path" && k !== "base_model_name");
  if (unknown.length > 0) throw new LoraConfigError(`Invalid fields for --lora-modules: ${item} - unexpected keyword argument '${unknown[0]}'`);
  if (typeof o.name !== "string" || o.name === "" || typeof o.path !== "string" || o.path === "") {
    throw new LoraConfigError(`Invalid fields for --lora-modules: ${item} - name and path must be non-empty strings`);
  }
  if (o.base_model_name !== undefined && o.base_model_name !== null && typeof o.base_model_name !== "string") {
    throw new LoraConfigError(`Invalid fields for --lora-modules: ${item} - base_model_name must be a string`);
  }
  return { name: o.name, path: o.path, ...(typeof o.base_model_name === "string" ? { baseModelName: o.base_model_name } : {}) };
}

/**
 * vLLM's `--lora-modules` takes several items after one flag (argparse
 * nargs="+"): `--lora-modules a=/x b=/y`. node's parseArgs takes one value
 * per flag, so the items that follow are given a flag each.
 */
export function expandLoraModulesArgv(argv: readonly string[]): string[] {
  const out: string[] = [];
  let inModules = false;
  for (const a of argv) {
    if (a === "--lora-modules") {
      inModules = true;
      continue;
    }
    if (inModules && !a.startsWith("--")) {
      out.push("--lora-modules", a);
      continue;
    }
    inModules = false;
    out.push(a);
  }
  return out;
}

interface LoraFlags {
  enableLora: boolean;
  modules: readonly string[];
  maxLoras?: number;
  maxLoraRank?: number;
  maxCpuLoras?: number;
  swapMs?: number;
  diskMs?: number;
}

/** The LoRA settings of an engine, or undefined without --enable-lora. Throws LoraConfigError. */
export function loraSettings(
  flags: LoraFlags,
  env: Record<string, string | undefined>,
  hw: { arch: ModelArch; gpuId: string; tp: number },
): SimLoraSettings | undefined {
  if (!flags.enableLora) {
    if (flags.modules.length > 0) throw new LoraConfigError("--lora-modules needs --enable-lora (vLLM: LoRA is not enabled)");
    return undefined;
  }
  const maxLoras = flags.maxLoras ?? DEFAULT_MAX_LORAS;
  const maxLoraRank = flags.maxLoraRank ?? DEFAULT_MAX_LORA_RANK;
  const maxCpuLoras = flags.maxCpuLoras ?? maxLoras;
  if (!Number.isInteger(maxLoras) || maxLoras < 1) throw new LoraConfigError(`--max-loras: expected an integer ≥ 1, got ${maxLoras}`);
  if (!LORA_RANKS.includes(maxLoraRank)) throw new LoraConfigError(`--max-lora-rank: expected one of ${LORA_RANKS.join(", ")}, got ${maxLoraRank}`);
  if (maxCpuLoras < maxLoras) throw new LoraConfigError(`max_cpu_loras (${maxCpuLoras}) must be >= max_loras (${maxLoras})`);
  const modules = flags.modules.map(parseLoraModule);
  const names = new Set<string>();
  for (const m of modules) {
    if (names.has(m.name)) throw new LoraConfigError(`--lora-modules: The lora adapter '${m.name}' has already been loaded.`);
    names.add(m.name);
  }
  return {
    maxLoras,
    maxLoraRank,
    maxCpuLoras,
    modules,
    runtimeUpdates: runtimeLoraUpdatesAllowed(env),
    cost: adapterCostModel(hw.arch, hw.gpuId, hw.tp, {
      ...(flags.swapMs !== undefined ? { swapMs: flags.swapMs } : {}),
      ...(flags.diskMs !== undefined ? { diskMs: flags.diskMs } : {}),
    }),
  };
}
