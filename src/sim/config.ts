/**
 * sim-engine settings: the fixed ones chosen at start (models, KV geometry,
 * listeners) and the live ones `POST /sim/config` may change (latency,
 * faults, dead, per-GPU faults), with the zod schema of that patch.
 */
import { z } from "zod";
import { type Fault, faultName, parseFault } from "./faults.ts";
import type { SimKvEventsConfig } from "./kv-events-config.ts";
import type { SimLoraSettings } from "./lora/lora-config.ts";
import type { LengthDistribution } from "./output-length.ts";
import type { KvCacheDtype } from "./profiles/profile.ts";
import { type Frontend, loneDecodeMs, NO_FRONTEND, type StepCostModel, type StepTiming, stepMs } from "./step-time.ts";

export const DEFAULT_SIM_PORT = 8001;
export const DEFAULT_BLOCK_SIZE_TOKENS = 16;
export const DEFAULT_PREFILL_OVERHEAD_MS = 5;
export const DEFAULT_PREFILL_MS_PER_TOKEN = 0.05;
export const DEFAULT_BATCH_SLOWDOWN = 0.5;
export const DEFAULT_EMBEDDING_DIM = 384;
/** vLLM's max_num_batched_tokens on GPUs under 70 GiB (and A100s): the budget when no profile says otherwise. */
export const DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048;

export type MetricsFlavor = "vllm-v1" | "vllm-v0" | "sglang";
export const METRICS_FLAVORS: readonly MetricsFlavor[] = ["vllm-v1", "vllm-v0", "sglang"];

/** Fixed for the life of the process. */
export interface SimStaticConfig {
  /** Served model names; the first labels the metrics (like vLLM's served_model_name[0]). */
  models: readonly string[];
  maxNumSeqs: number;
  numGpuBlocks: number;
  blockSize: number;
  maxModelLen: number;
  /** The natural answer length when --output-len fixes it (or the distribution's median). */
  outputLen: number;
  /** Natural answer lengths (absent: always outputLen). */
  outputLenDist?: LengthDistribution;
  embeddingDim: number;
  startupMs: number;
  metricsFlavor: MetricsFlavor;
  gpus: number;
  gpuModel: string;
  /** Label for the GPU model in the DCGM text: lint-clean DCGM_FI_DEV_NAME (default) or the exporter's modelName. */
  dcgmModelLabel: "DCGM_FI_DEV_NAME" | "modelName";
  /** Refuse chat prefills (continue_final_message, add_generation_prompt) with a 400, as OpenAI's API does (absent: accepted). */
  rejectContinuation?: boolean;
  /** Answer FastAPI's 404 on the Anthropic Messages API's paths, as an engine without that API (SGLang, an older vLLM) does (absent: served). */
  noMessagesApi?: boolean;
  /** The per-step token budget (vLLM's max_num_batched_tokens; absent: 2048). */
  maxNumBatchedTokens?: number;
  /** The engine's clock runs this many times faster than the wall clock (absent: 1). */
  timeScale?: number;
  /** Framebuffer the engine reserves per GPU from start (DCGM FB_USED), MiB; absent: 0.9 of the GPU's memory. */
  reservedMiB?: number;
  /** The profile the engine was derived from, for /sim/state and the startup log. */
  profile?: string;
  /** vLLM's --kv-cache-dtype the profile was derived with, for /sim/state and vllm:cache_config_info; absent: auto. */
  kvCacheDtype?: KvCacheDtype;
  /**
   * While loading (--startup-ms): "held", as vLLM (the port is bound, every
   * request is answered once the weights are loaded), or "split" (/health 200
   * at once, /v1/models and the API 503 until loaded). Absent: held.
   */
  startupAnswers?: "held" | "split";
  /** --enable-prompt-tokens-details: usage carries prompt_tokens_details.cached_tokens when the prefix cache served some of the prompt, as vLLM's flag; absent: never. */
  enablePromptTokensDetails?: boolean;
  /** Publish vLLM's KV-cache events (--kv-events-config); absent: none. */
  kvEvents?: SimKvEventsConfig;
  /** vLLM's async scheduling (its default since 0.14; --no-async-scheduling turns it off): a request reaching a busy engine joins the step after next. Absent: off. */
  asyncScheduling?: boolean;
  /** The root of the prefix cache's block-hash chain (vLLM's NONE_HASH: random per process unless PYTHONHASHSEED); absent: 0. */
  blockHashRoot?: bigint;
  /** The seed of the engine's noise (step times, API-server latency): a fixed one reproduces a run's draws; absent: a random one. */
  seed?: number;
  /** LoRA adapters (--enable-lora); absent: LoRA off. */
  lora?: SimLoraSettings;
  /** --api-key (or VLLM_API_KEY), as vLLM: requests outside its public paths need `Authorization: Bearer KEY`; absent: none. */
  apiKey?: string;
}

/** Per-GPU fault state set through POST /sim/config. */
export interface GpuFaultState {
  xidErrors: number;
  /** Overrides the load-derived temperature when set. */
  temperatureC: number | undefined;
  eccSbeVolatile: number;
  eccDbeVolatile: number;
  eccSbeAggregate: number;
  eccDbeAggregate: number;
  /** false: the exporter sends no DCGM_FI_DEV_GPU_UTIL for this GPU, as on drivers or MIG modes that do not support it. */
  utilizationReported: boolean;
  /** Overrides the load-derived utilisation (percent) when set: sustained saturation on demand, whatever the engine runs. */
  utilizationPct: number | undefined;
}

/** Changeable at run time. */
export interface SimLiveConfig {
  itlMs: number;
  prefillOverheadMs: number;
  prefillMsPerToken: number;
  /** The spread of each step's time: the coefficient of variation of its normal noise. */
  jitter: number;
  /** The mean of the exponential part of a request's API-server latency (ms; absent or 0: none). */
  frontendJitterMs?: number;
  /** Step time grows by this fraction at a full batch (running = max-num-seqs). */
  batchSlowdown: number;
  faultRate: number;
  faultTypes: Fault[];
  dead: boolean;
  /** The DCGM exporter answers 503 (its host engine is gone): the gateway's GPU data goes stale. */
  dcgmDead: boolean;
  gpus: GpuFaultState[];
  /** The step cost model derived from a GPU and a model (absent: the flat model of itlMs, batchSlowdown and the prefill fields). */
  derived?: StepCostModel;
  /** With `derived`: the decode part follows itlMs and batchSlowdown instead (--batch-slowdown given). */
  flatDecode?: boolean;
  /** With `derived`: the prefill part follows the prefill fields instead (--prefill-* given). */
  flatPrefill?: boolean;
  /** With `derived`: the API server's time per request before the engine sees it (before scaling). */
  frontend?: Frontend;
  /** The frontend was set by flags: it applies whatever decides the prefill part. */
  frontendExplicit?: boolean;
}

/**
 * The step timing the live settings mean. With a derived model, itlMs names
 * a lone decode step: the derived clock is scaled so that one takes itlMs
 * (the profile's own figure when --itl-ms is not given).
 */
export function stepTimingOf(live: SimLiveConfig, maxNumSeqs: number): { timing: StepTiming; frontend: Frontend; firstTokenDelayMs: number } {
  const flatDecode = { itlMs: live.itlMs, batchSlowdown: live.batchSlowdown, maxNumSeqs };
  const flatPrefill = { msPerToken: live.prefillMsPerToken };
  const explicit = live.frontendExplicit && live.frontend ? live.frontend : NO_FRONTEND;
  const m = live.derived;
  // The flat prefill's fixed cost is per request and in parallel, as the older sim had it: the
  // first token comes that long after the prompt's last chunk, the request holding its slot.
  if (!m) return { timing: { derived: undefined, derivedScale: 1, flatDecode, flatPrefill }, frontend: explicit, firstTokenDelayMs: live.prefillOverheadMs };
  const scale = live.itlMs / loneDecodeMs(m);
  return {
    timing: { derived: m, derivedScale: scale, flatDecode: live.flatDecode ? flatDecode : undefined, flatPrefill: live.flatPrefill ? flatPrefill : undefined },
    // The API server's time is the host's: --itl-ms, which scales the GPU's steps, leaves it alone.
    frontend: live.flatPrefill ? explicit : (live.frontend ?? NO_FRONTEND),
    firstTokenDelayMs: live.flatPrefill ? live.prefillOverheadMs : 0,
  };
}

/** An embeddings request's time (simulated ms): its prefill, in budget-sized chunks, plus the frontend. */
export function embeddingMs(live: SimLiveConfig, fixed: SimStaticConfig, tokens: number): number {
  const { timing, frontend, firstTokenDelayMs } = stepTimingOf(live, fixed.maxNumSeqs);
  const budget = fixed.maxNumBatchedTokens ?? DEFAULT_MAX_NUM_BATCHED_TOKENS;
  let ms = frontend.latencyMs + frontend.serviceMs + firstTokenDelayMs;
  for (let done = 0; done < tokens; done += budget) {
    const n = Math.min(budget, tokens - done);
    ms += stepMs(timing, {
      seqs: 1,
      tokens: n,
      decodeSeqs: 0,
      decodeContext: 0,
      prefillTokens: n,
      prefillSeqs: 1,
      prefillContext: done + n,
      prefillPairs: n * done + (n * (n + 1)) / 2,
      running: 1,
    });
  }
  return ms;
}

export function newGpuFaultState(): GpuFaultState {
  return {
    xidErrors: 0,
    temperatureC: undefined,
    eccSbeVolatile: 0,
    eccDbeVolatile: 0,
    eccSbeAggregate: 0,
    eccDbeAggregate: 0,
    utilizationReported: true,
    utilizationPct: undefined,
  };
}

const faultNameSchema = z
  .string()
  .refine((s) => parseFault(s) !== undefined, { message: "unknown fault type (expected 500, 429, 503, no-headers, no-first-token, stall:N, cut:N, slow:MS)" });

const gpuPatchSchema = z.strictObject({
  index: z.number().int().min(0),
  xid_errors: z.number().int().min(0).optional(),
  temperature_c: z.number().min(0).max(200).nullable().optional(),
  ecc_sbe_volatile_total: z.number().int().min(0).optional(),
  ecc_dbe_volatile_total: z.number().int().min(0).optional(),
  ecc_sbe_aggregate_total: z.number().int().min(0).optional(),
  ecc_dbe_aggregate_total: z.number().int().min(0).optional(),
  utilization_reported: z.boolean().optional(),
  utilization_pct: z.number().min(0).max(100).nullable().optional(),
});

/** The wire form of POST /sim/config: every field optional, unknown fields rejected. */
export const simConfigPatchSchema = z.strictObject({
  itl_ms: z.number().min(0).max(600_000).optional(),
  prefill_overhead_ms: z.number().min(0).max(600_000).optional(),
  prefill_ms_per_token: z.number().min(0).max(10_000).optional(),
  jitter: z.number().min(0).max(1).optional(),
  frontend_jitter_ms: z.number().min(0).max(600_000).optional(),
  batch_slowdown: z.number().min(0).max(100).optional(),
  fault_rate: z.number().min(0).max(1).optional(),
  fault_types: z.array(faultNameSchema).optional(),
  dead: z.boolean().optional(),
  dcgm_dead: z.boolean().optional(),
  gpus: z.array(gpuPatchSchema).optional(),
});
type SimConfigPatch = z.infer<typeof simConfigPatchSchema>;

/** Apply a validated patch; throws on a GPU index out of range (nothing applied then). */
export function applyConfigPatch(live: SimLiveConfig, patch: SimConfigPatch): void {
  for (const g of patch.gpus ?? []) {
    if (g.index >= live.gpus.length) throw new Error(`gpus[].index ${g.index} out of range (this engine has ${live.gpus.length} GPUs)`);
  }
  if (patch.itl_ms !== undefined) live.itlMs = patch.itl_ms;
  // Setting a flat part on a derived engine switches that part to the flat model, as the flags do.
  if (patch.prefill_overhead_ms !== undefined) {
    live.prefillOverheadMs = patch.prefill_overhead_ms;
    live.flatPrefill = true;
  }
  if (patch.prefill_ms_per_token !== undefined) {
    live.prefillMsPerToken = patch.prefill_ms_per_token;
    live.flatPrefill = true;
  }
  if (patch.jitter !== undefined) live.jitter = patch.jitter;
  if (patch.frontend_jitter_ms !== undefined) live.frontendJitterMs = patch.frontend_jitter_ms;
  if (patch.batch_slowdown !== undefined) {
    live.batchSlowdown = patch.batch_slowdown;
    live.flatDecode = true;
  }
  if (patch.fault_rate !== undefined) live.faultRate = patch.fault_rate;
  if (patch.fault_types !== undefined) live.faultTypes = patch.fault_types.map((s) => parseFault(s)).filter((f): f is Fault => f !== undefined);
  if (patch.dead !== undefined) live.dead = patch.dead;
  if (patch.dcgm_dead !== undefined) live.dcgmDead = patch.dcgm_dead;
  for (const g of patch.gpus ?? []) {
    const s = live.gpus[g.index]!;
    if (g.xid_errors !== undefined) s.xidErrors = g.xid_errors;
    if (g.temperature_c !== undefined) s.temperatureC = g.temperature_c ?? undefined;
    if (g.ecc_sbe_volatile_total !== undefined) s.eccSbeVolatile = g.ecc_sbe_volatile_total;
    if (g.ecc_dbe_volatile_total !== undefined) s.eccDbeVolatile = g.ecc_dbe_volatile_total;
    if (g.ecc_sbe_aggregate_total !== undefined) s.eccSbeAggregate = g.ecc_sbe_aggregate_total;
    if (g.ecc_dbe_aggregate_total !== undefined) s.eccDbeAggregate = g.ecc_dbe_aggregate_total;
    if (g.utilization_reported !== undefined) s.utilizationReported = g.utilization_reported;
    if (g.utilization_pct !== undefined) s.utilizationPct = g.utilization_pct ?? undefined;
  }
}

/** The live settings as /sim/state shows them (wire names). */
export function liveConfigView(live: SimLiveConfig): Record<string, unknown> {
  return {
    itl_ms: live.itlMs,
    prefill_overhead_ms: live.prefillOverheadMs,
    prefill_ms_per_token: live.prefillMsPerToken,
    jitter: live.jitter,
    frontend_jitter_ms: live.frontendJitterMs ?? 0,
    batch_slowdown: live.batchSlowdown,
    step_model: live.derived
      ? { decode: live.flatDecode ? "flat" : "derived", prefill: live.flatPrefill ? "flat" : "derived" }
      : { decode: "flat", prefill: "flat" },
    fault_rate: live.faultRate,
    fault_types: live.faultTypes.map(faultName),
    dead: live.dead,
    dcgm_dead: live.dcgmDead,
    gpus: live.gpus.map((g, index) => ({
      index,
      xid_errors: g.xidErrors,
      temperature_c: g.temperatureC ?? null,
      ecc_sbe_volatile_total: g.eccSbeVolatile,
      ecc_dbe_volatile_total: g.eccDbeVolatile,
      ecc_sbe_aggregate_total: g.eccSbeAggregate,
      ecc_dbe_aggregate_total: g.eccDbeAggregate,
      utilization_reported: g.utilizationReported,
      utilization_pct: g.utilizationPct ?? null,
    })),
  };
}
