/** Named GPU × model profiles (`--profile NAME`), the default one, and the table `--list-profiles` prints. */
import { loneDecodeMs, type StepComposition, stepMs } from "../step-time.ts";
import type { EfficiencyConstants } from "./efficiency.ts";
import { type Dtype, findGpu, GPUS } from "./gpu-facts.ts";
import { ARCHS, findArch } from "./model-facts.ts";
import { type DerivedProfile, deriveProfile, type KvCacheDtype, ProfileError } from "./profile.ts";

export interface NamedProfile {
  name: string;
  gpu: string;
  arch: string;
  tp: number;
  dtype: Dtype;
  /** Absent: "auto". */
  kvCacheDtype?: KvCacheDtype;
  /** Set where the published run set it. */
  gpuMemoryUtilization?: number;
  maxModelLen?: number;
  what: string;
}

export const NAMED_PROFILES: readonly NamedProfile[] = [
  { name: "h100-llama-3.1-8b", gpu: "h100", arch: "llama-3.1-8b", tp: 1, dtype: "bf16", what: "the default; fitted to InferenceBench's H100 sweep" },
  {
    name: "l4-qwen2.5-0.5b",
    gpu: "l4",
    arch: "qwen2.5-0.5b",
    tp: 1,
    dtype: "bf16",
    gpuMemoryUtilization: 0.6,
    maxModelLen: 8192,
    what: "fitted to the L4 sweep (its --gpu-memory-utilization 0.6 --max-model-len 8192)",
  },
  { name: "h100-qwen3-8b", gpu: "h100", arch: "qwen3-8b", tp: 1, dtype: "bf16", what: "predicted, no constant fitted to it (GPUStack's ShareGPT runs)" },
  {
    name: "a100-40gb-llama-3.1-8b",
    gpu: "a100-40gb",
    arch: "llama-3.1-8b",
    tp: 1,
    dtype: "bf16",
    what: "predicted, no constant fitted to it (an A100 40GB sweep)",
  },
  { name: "a100-80gb-llama-3.1-8b", gpu: "a100-80gb", arch: "llama-3.1-8b", tp: 1, dtype: "bf16", what: "derived" },
  { name: "l40s-qwen3-8b", gpu: "l40s", arch: "qwen3-8b", tp: 1, dtype: "bf16", what: "derived" },
  { name: "h200-llama-3.1-8b", gpu: "h200", arch: "llama-3.1-8b", tp: 1, dtype: "bf16", what: "derived" },
  { name: "h100x2-qwen3-32b", gpu: "h100", arch: "qwen3-32b", tp: 2, dtype: "bf16", what: "derived" },
  { name: "h100-qwen3-32b-fp8", gpu: "h100", arch: "qwen3-32b", tp: 1, dtype: "fp8", what: "derived" },
  {
    name: "h100-qwen3-32b-fp8-kv-fp8",
    gpu: "h100",
    arch: "qwen3-32b",
    tp: 1,
    dtype: "fp8",
    kvCacheDtype: "fp8",
    what: "derived: the fp8 profile with --kv-cache-dtype fp8 (twice its KV blocks)",
  },
  { name: "h100x4-llama-3.1-70b", gpu: "h100", arch: "llama-3.1-70b", tp: 4, dtype: "bf16", what: "derived (the llm-d 37-capacity pods' model)" },
  { name: "h200x2-llama-3.1-70b", gpu: "h200", arch: "llama-3.1-70b", tp: 2, dtype: "bf16", what: "derived" },
  { name: "b200-llama-3.1-70b", gpu: "b200", arch: "llama-3.1-70b", tp: 1, dtype: "bf16", what: "derived" },
  {
    name: "h200-llama-3.3-nemotron-super-49b",
    gpu: "h200",
    arch: "llama-3.3-nemotron-super-49b",
    tp: 1,
    dtype: "bf16",
    what: "derived: a pruned model whose layers differ, on the one H200 its model card names",
  },
];

export const DEFAULT_PROFILE = "h100-llama-3.1-8b";

export function findProfile(name: string): NamedProfile | undefined {
  return NAMED_PROFILES.find((p) => p.name === name.toLowerCase());
}

export interface ProfileChoice {
  profile?: string;
  gpu?: string;
  arch?: string;
  tp?: number;
  dtype?: Dtype;
  kvCacheDtype?: KvCacheDtype;
  gpuMemoryUtilization?: number;
}

/** A profile's name for the parts it was resolved from: `GPU[xTP]-ARCH[-fp8][-kv-KVDTYPE]`. */
function profileName(gpu: string, tp: number, arch: string, dtype: Dtype, kvCacheDtype: KvCacheDtype): string {
  const kv = kvCacheDtype === "auto" ? "" : `-kv-${kvCacheDtype.replace("_", "-")}`;
  return `${gpu}${tp > 1 ? `x${tp}` : ""}-${arch}${dtype === "fp8" ? "-fp8" : ""}${kv}`;
}

/** `--profile` names a pair; `--gpu`, `--arch`, `--tp`, `--dtype`, `--kv-cache-dtype` override its parts; nothing given is the default profile. */
export function resolveProfile(c: ProfileChoice, efficiency?: EfficiencyConstants): { name: string; profile: DerivedProfile } {
  const base = findProfile(c.profile ?? DEFAULT_PROFILE);
  if (!base) throw new ProfileError(`--profile: unknown profile '${c.profile}' (llmgw sim-engine --list-profiles shows them)`);
  const gpu = findGpu(c.gpu ?? base.gpu);
  if (!gpu) throw new ProfileError(`--gpu: unknown GPU '${c.gpu}' (expected one of ${GPUS.map((g) => g.id).join(", ")})`);
  const arch = findArch(c.arch ?? base.arch);
  if (!arch) throw new ProfileError(`--arch: unknown model '${c.arch}' (expected one of ${ARCHS.map((a) => a.id).join(", ")})`);
  const same = gpu.id === base.gpu && arch.id === base.arch;
  const tp = c.tp ?? (same ? base.tp : 1);
  const dtype = c.dtype ?? (same ? base.dtype : "bf16");
  const kvCacheDtype = c.kvCacheDtype ?? (same ? (base.kvCacheDtype ?? "auto") : "auto");
  const profile = deriveProfile({
    gpu,
    arch,
    tp,
    dtype,
    kvCacheDtype,
    gpuMemoryUtilization: c.gpuMemoryUtilization ?? (same ? base.gpuMemoryUtilization : undefined),
    maxModelLen: same ? base.maxModelLen : undefined,
    efficiency,
  });
  const unchanged = same && tp === base.tp && dtype === base.dtype && kvCacheDtype === (base.kvCacheDtype ?? "auto");
  const name = unchanged ? base.name : profileName(gpu.id, tp, arch.id, dtype, kvCacheDtype);
  return { name, profile };
}

/** A step that fills the token budget with one prefill chunk at the start of its prompt. */
function budgetPrefill(p: DerivedProfile): StepComposition {
  const n = p.maxNumBatchedTokens;
  return {
    seqs: 1,
    tokens: n,
    decodeSeqs: 0,
    decodeContext: 0,
    prefillTokens: n,
    prefillSeqs: 1,
    prefillContext: n,
    prefillPairs: (n * (n + 1)) / 2,
    running: 1,
  };
}

/**
 * Prompt tokens a second one replica prefills when its steps are full: the
 * token budget over the time of a step that fills it with prefill. A long
 * prompt is compute-bound (vLLM chunks it into budget-sized steps), so this
 * is the ceiling on prompt-token throughput; decodes sharing the steps and
 * bursts queueing for them come off it, as the autoscaler's headroom.
 */
export function prefillTokensPerS(p: DerivedProfile): number {
  const t = { derived: p.cost, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined };
  return (p.maxNumBatchedTokens * 1000) / stepMs(t, budgetPrefill(p));
}

/** A step decoding a full batch of 1k-token contexts. */
function fullDecode(seqs: number): StepComposition {
  return {
    seqs,
    tokens: seqs,
    decodeSeqs: seqs,
    decodeContext: seqs * 1024,
    prefillTokens: 0,
    prefillSeqs: 0,
    prefillContext: 0,
    prefillPairs: 0,
    running: seqs,
  };
}

export interface ProfileRow {
  name: string;
  gpu: string;
  arch: string;
  tp: number;
  dtype: Dtype;
  kvCacheDtype: KvCacheDtype;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  numGpuBlocks: number;
  kvTokens: number;
  stepBatch1Ms: number;
  stepBudgetMs: number;
  stepDecode256Ms: number;
  what: string;
}

export function profileRow(name: string, p: DerivedProfile, what: string): ProfileRow {
  const t = { derived: p.cost, derivedScale: 1, flatDecode: undefined, flatPrefill: undefined };
  return {
    name,
    gpu: p.gpu.id,
    arch: p.arch.id,
    tp: p.tp,
    dtype: p.dtype,
    kvCacheDtype: p.kvCacheDtype,
    maxNumSeqs: p.maxNumSeqs,
    maxNumBatchedTokens: p.maxNumBatchedTokens,
    numGpuBlocks: p.numGpuBlocks,
    kvTokens: p.numGpuBlocks * p.blockSize,
    stepBatch1Ms: loneDecodeMs(p.cost),
    stepBudgetMs: stepMs(t, budgetPrefill(p)),
    stepDecode256Ms: stepMs(t, fullDecode(Math.min(256, p.maxNumSeqs))),
    what,
  };
}

/** Every named profile, then every GPU × model at the smallest tensor-parallel degree that holds it (bf16). */
export function listProfiles(): ProfileRow[] {
  const rows: ProfileRow[] = [];
  for (const n of NAMED_PROFILES) {
    const { name, profile } = resolveProfile({ profile: n.name });
    rows.push(profileRow(name, profile, n.what));
  }
  for (const gpu of GPUS) {
    for (const arch of ARCHS) {
      for (const tp of [1, 2, 4, 8]) {
        if (arch.attentionHeads % tp !== 0) continue;
        try {
          const { name, profile } = resolveProfile({ gpu: gpu.id, arch: arch.id, tp });
          if (!rows.some((r) => r.name === name)) rows.push(profileRow(name, profile, "derived"));
          break;
        } catch (err) {
          if (!(err instanceof ProfileError)) throw err;
        }
      }
    }
  }
  return rows;
}
