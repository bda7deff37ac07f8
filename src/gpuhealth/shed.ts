/** The batch shed decision, pure: refuse the shed band with 429 GPU_SATURATED while its pool is saturated; never any other band; nothing without a gpu_health block. */
import type { GpuHealthConfig } from "../config/types.ts";
import { LlmgwError } from "../shared/errors.ts";

/**
 * `band` is the request's band index (config.admission.bands). Retry-After is
 * the sustained window (poll interval × samples): saturation cannot be seen
 * to clear sooner than one sample, and a batch client retrying every second
 * through a sustained overload only adds load.
 */
export function shedDecision(cfg: GpuHealthConfig | null, band: number, pool: string, poolSaturated: boolean): LlmgwError | undefined {
  if (cfg === null || !cfg.shedBatch || band !== cfg.shedBand || !poolSaturated) return undefined;
  const retryAfterS = Math.max(1, Math.ceil((cfg.pollIntervalMs * cfg.sustainedSamples) / 1000));
  return new LlmgwError("GPU_SATURATED", `The GPUs of pool '${pool}' are saturated; batch requests are shed until they are not. Retry later.`, { retryAfterS });
}
