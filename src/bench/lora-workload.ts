/**
 * A LoRA workload, reusable by any routing bench: one base model, many
 * adapters whose popularity is skewed like production's (Zipf, as S-LoRA's
 * and Punica's synthetic traces draw it), Poisson arrivals, distinct
 * prompts. Pure and seeded: the same options give the same requests at the
 * same times, so policies compared in one run face the same load. It also
 * says how to start the engines (sim-engine flags: every replica lists every
 * adapter, as a fleet that registers all adapters everywhere would) and how
 * to count what routing saves (adapter loads, from each sim's /sim/state).
 */

export interface LoraWorkloadOptions {
  /** The base model's served name. */
  base: string;
  /** Adapters (named `<prefix>-0` … by popularity rank). */
  adapters: number;
  /** Zipf exponent of adapter popularity: P(rank k) ∝ 1 / k^s. */
  zipfS: number;
  /** Requests measured. */
  requests: number;
  /** Requests sent first, from the same stream, and not counted: engines and gateway reach a steady state (a fleet does not start cold each minute). */
  warmup: number;
  /** Mean arrivals per second (Poisson). */
  ratePerS: number;
  /** Cap on each answer's tokens (answers end earlier at their natural length). */
  maxTokens: number;
  /** Prompt length in characters (the sim counts ~4 per token). */
  promptChars: number;
  /** GPU slots per replica (vLLM's --max-loras). */
  maxLoras: number;
  seed: number;
  /** Adapter name prefix. */
  prefix?: string;
}

export const DEFAULT_LORA_WORKLOAD: Readonly<LoraWorkloadOptions> = Object.freeze({
  base: "llama",
  adapters: 48,
  zipfS: 1,
  requests: 1200,
  warmup: 200,
  ratePerS: 20,
  maxTokens: 128,
  promptChars: 800,
  maxLoras: 8,
  seed: 20,
  prefix: "adapter",
});

interface LoraRequest {
  /** ms after the start at which it is sent. */
  atMs: number;
  /** Part of the warm-up (not measured). */
  warmup: boolean;
  adapter: string;
  /** The streaming chat body, ready to send. */
  body: string;
}

export interface LoraWorkload {
  options: LoraWorkloadOptions;
  adapters: string[];
  requests: LoraRequest[];
  /** Share of requests each adapter gets, by rank (sums to 1). */
  popularity: number[];
}

/** mulberry32: a small seeded PRNG. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** P(rank k) ∝ 1/k^s for k = 1..n. */
export function zipfWeights(n: number, s: number): number[] {
  const raw = Array.from({ length: n }, (_, k) => 1 / (k + 1) ** s);
  const total = raw.reduce((a, b) => a + b, 0);
  return raw.map((w) => w / total);
}

/** A sampler of ranks 0..n-1 with the given weights (inverse CDF, binary search). */
function weightedSampler(weights: readonly number[], random: () => number): () => number {
  const cdf: number[] = [];
  let acc = 0;
  for (const w of weights) cdf.push((acc += w));
  return () => {
    const u = random() * acc;
    let lo = 0;
    let hi = cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid]! > u) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
}

function adapterNames(o: Pick<LoraWorkloadOptions, "adapters" | "prefix">): string[] {
  return Array.from({ length: o.adapters }, (_, i) => `${o.prefix ?? "adapter"}-${i}`);
}

export function buildLoraWorkload(options: LoraWorkloadOptions): LoraWorkload {
  const names = adapterNames(options);
  const popularity = zipfWeights(options.adapters, options.zipfS);
  const random = seededRandom(options.seed);
  const pick = weightedSampler(popularity, random);
  const filler = "Please summarise the following notes for the team. ";
  const requests: LoraRequest[] = [];
  let t = 0;
  for (let i = 0; i < options.warmup + options.requests; i++) {
    // Exponential gaps: a Poisson process of the given rate.
    t += (-Math.log(1 - random()) / options.ratePerS) * 1000;
    const adapter = names[pick()]!;
    const head = `Request ${i} for ${adapter}. `;
    const content = (head + filler.repeat(Math.ceil(options.promptChars / filler.length))).slice(0, options.promptChars);
    requests.push({
      atMs: t,
      warmup: i < options.warmup,
      adapter,
      body: JSON.stringify({ model: adapter, stream: true, max_tokens: options.maxTokens, messages: [{ role: "user", content }] }),
    });
  }
  return { options, adapters: names, requests, popularity };
}

/**
 * sim-engine flags for one replica of the workload's base: LoRA on with
 * `maxLoras` GPU slots, every adapter registered and kept in host memory
 * (so a load is a swap into a GPU slot, not a disk read).
 */
export function loraSimArgs(w: LoraWorkload): string[] {
  return [
    "--model",
    w.options.base,
    "--enable-lora",
    "--max-loras",
    String(w.options.maxLoras),
    "--max-cpu-loras",
    String(Math.max(w.options.maxLoras, w.adapters.length)),
    "--lora-modules",
    ...w.adapters.map((a) => `${a}=/adapters/${a}`),
  ];
}

/** Adapter loads (copies into a GPU slot) and disk reads a sim-engine has made, from its /sim/state. */
export async function simAdapterLoads(simUrl: string): Promise<{ gpuLoads: number; diskLoads: number }> {
  const state = (await (await fetch(`${simUrl}/sim/state`)).json()) as { lora: { gpu_loads: number; disk_loads: number } | null };
  return { gpuLoads: state.lora?.gpu_loads ?? 0, diskLoads: state.lora?.disk_loads ?? 0 };
}
