/**
 * Gate 5: batch shed under sustained GPU saturation (after replay and cache,
 * before admission). While the pool a request would be admitted to is
 * saturated — the health worker's flag in shared memory, no message — a
 * request in gpu_health.shed_band gets 429 GPU_SATURATED with Retry-After
 * (src/gpuhealth/shed.ts), counted in llmgw_gpu_shed_total; every other band
 * passes, and without a gpu_health block nothing is ever shed.
 */

import type { Config } from "../../config/types.ts";
import { shedDecision } from "../../gpuhealth/shed.ts";
import type { JobsMetrics } from "../../metrics/jobs-metrics.ts";
import type { GpuSaturationTable } from "../../shared/gpu-saturation-table.ts";
import type { AdmissionClient } from "../admission-client.ts";
import type { EndpointRegistry } from "../endpoints.ts";
import type { Exchange } from "../request/exchange.ts";

/** What the shed gate uses: the gpu_health block, which pool a model is admitted to, and that pool's saturation flag. */
export interface ShedGateDeps {
  readonly config: Pick<Config, "gpuHealth">;
  readonly admission: Pick<AdmissionClient, "poolOf">;
  readonly gpuSaturation: Pick<GpuSaturationTable, "saturated">;
  readonly endpoints: Pick<EndpointRegistry, "poolName">;
  readonly jobsMetrics: Pick<JobsMetrics, "gpuShed">;
}

/** `model`: the request's (canonical). */
export function batchShedGate(ctx: ShedGateDeps, x: Exchange, model: string): void {
  const cfg = ctx.config.gpuHealth;
  if (cfg === null || !cfg.shedBatch || x.band !== cfg.shedBand) return;
  const pool = ctx.admission.poolOf(model);
  if (pool === undefined || !ctx.gpuSaturation.saturated(pool, Date.now())) return;
  const name = ctx.endpoints.poolName(pool) ?? String(pool);
  const refusal = shedDecision(cfg, x.band, name, true);
  if (refusal === undefined) return;
  ctx.jobsMetrics.gpuShed.inc({ pool: name });
  throw refusal;
}
