/**
 * How long an answer runs when nothing caps it: the natural length, where
 * the simulated model would emit EOS. Drawn from a distribution, but as a
 * function of the prompt (seeded by the model state before any continued
 * tokens), so the same request always ends at the same token and a
 * continuation ends where the uninterrupted answer would have.
 */

export type LengthDistribution =
  | { kind: "fixed"; tokens: number }
  | { kind: "lognormal"; median: number; sigma: number }
  | { kind: "uniform"; min: number; max: number };

/**
 * The default: log-normal with median 129 tokens, the conversation trace's
 * median output in Azure's public LLM inference trace (Patel et al.,
 * "Splitwise", ISCA 2024, Table II), and σ 0.94, which gives a mean of 201
 * tokens, what vLLM's benchmark loader draws from ShareGPT (GPUStack's
 * `vllm bench serve` runs: 201,422 tokens for 1,000 prompts).
 */
export const DEFAULT_LENGTH_DISTRIBUTION: LengthDistribution = Object.freeze({ kind: "lognormal", median: 129, sigma: 0.94 });

const MAX_NATURAL_TOKENS = 1_000_000;

/** `fixed:N`, `lognormal:MEDIAN:SIGMA`, `uniform:MIN:MAX`, or a bare N (fixed); throws with what was expected. */
export function parseLengthDistribution(spec: string): LengthDistribution {
  const parts = spec.trim().split(":");
  const nums = parts.slice(1).map(Number);
  const ok = (n: number | undefined, min: number): n is number => n !== undefined && Number.isFinite(n) && n >= min;
  if (parts.length === 1 && ok(Number(parts[0]), 1) && Number.isInteger(Number(parts[0]))) return { kind: "fixed", tokens: Number(parts[0]) };
  if (parts[0] === "fixed" && nums.length === 1 && ok(nums[0], 1) && Number.isInteger(nums[0])) return { kind: "fixed", tokens: nums[0] };
  if (parts[0] === "lognormal" && nums.length === 2 && ok(nums[0], 1) && ok(nums[1], 0)) return { kind: "lognormal", median: nums[0], sigma: nums[1] };
  if (parts[0] === "uniform" && nums.length === 2 && ok(nums[0], 1) && ok(nums[1], nums[0] ?? 1) && Number.isInteger(nums[0]) && Number.isInteger(nums[1]))
    return { kind: "uniform", min: nums[0], max: nums[1] };
  throw new Error(`expected N, fixed:N, lognormal:MEDIAN:SIGMA or uniform:MIN:MAX, got '${spec}'`);
}

/** A uniform in (0, 1) from a 32-bit seed and a salt (murmur3's finaliser). */
function unit(seed: number, salt: number): number {
  let h = (seed ^ Math.imul(salt, 0x9e3779b1)) >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return ((h >>> 0) + 0.5) / 0x100000000;
}

/** The natural length for a prompt whose model state (before continued tokens) is `seed`. */
export function naturalLength(d: LengthDistribution, seed: number): number {
  switch (d.kind) {
    case "fixed":
      return d.tokens;
    case "uniform":
      return d.min + Math.floor(unit(seed, 1) * (d.max - d.min + 1));
    case "lognormal": {
      // Box–Muller from two seeded uniforms.
      const z = Math.sqrt(-2 * Math.log(unit(seed, 1))) * Math.cos(2 * Math.PI * unit(seed, 2));
      return Math.min(MAX_NATURAL_TOKENS, Math.max(1, Math.round(d.median * Math.exp(d.sigma * z))));
    }
    default: {
      const never: never = d;
      throw new Error(`unknown distribution ${String(never)}`);
    }
  }
}
