/**
 * The engine's randomness as measured on real GPUs (pure): a step's time
 * varies around the cost model's figure, and a request's time in the API
 * server varies around its mean. Both draw from the engine's own seeded
 * generator, so a fixed seed reproduces a run exactly.
 */

/**
 * The spread of a step's time: the coefficient of variation of the normal
 * noise each step's modelled time is multiplied by. Fitted on BLIS's real
 * H100 runs at their lightest load (`bench calibrate --noise`): their token
 * gaps spread 2–6 % at the 80th and 6–19 % at the 98th percentile above the
 * median, of which the step model's own variety (batch size, prefill chunks)
 * explains part.
 */
export const STEP_NOISE_CV = 0.04;

/**
 * The mean of the exponential part of a request's time in the API server
 * (ms): H100 · Llama-3.1-8B at concurrency 1 answers its first token with a
 * p99 0.97 ms above its p50, and an exponential's p99 lies 3.9 means above
 * its median.
 */
export const FRONTEND_JITTER_MS = 0.25;

/** A multiplier of mean 1 and standard deviation `cv`: normal, cut at ±3 standard deviations (1 when cv is 0). */
export function stepNoise(cv: number, random: () => number): number {
  if (cv <= 0) return 1;
  // Box–Muller: two uniform draws give one standard normal.
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.max(0.05, 1 + cv * Math.min(3, Math.max(-3, z)));
}

/**
 * A request's time in the API server: `latencyMs` on average, its part
 * above `latencyMs − meanMs` exponential with mean `meanMs` (so the mean
 * stays `latencyMs`); `latencyMs` itself when meanMs is 0.
 */
export function frontendLatency(latencyMs: number, meanMs: number, random: () => number): number {
  if (meanMs <= 0) return latencyMs;
  return Math.max(0, latencyMs - meanMs - meanMs * Math.log(1 - random()));
}

/** The engine's noise in a replay on the core. */
export interface ReplayNoise {
  stepCv: number;
  frontendJitterMs: number;
  seed: number;
}

/** The sim-engine's defaults from one fixed seed: a replay is the same on every run and machine. */
export const REPLAY_NOISE: ReplayNoise = Object.freeze({ stepCv: STEP_NOISE_CV, frontendJitterMs: FRONTEND_JITTER_MS, seed: 1 });
