/** Builds the scheduling view of an endpoint from the shared endpoint table, treating stale metrics as absent. */
import { CIRCUIT_CLOSED, CIRCUIT_HALF_OPEN, EndpointTable, F, I } from "../shared/endpoint-table.ts";
import type { EndpointView } from "../scheduling/types.ts";
import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";

export function readEndpointView(table: EndpointTable, d: EndpointDescriptor, now: number, staleAfterMs: number): EndpointView {
  const row = d.index;
  const metricsAt = table.getFloat(row, F.METRICS_AT);
  // Engine metrics lag by a scrape interval at best; past the stale limit they
  // describe a different moment and are treated as absent, not as idle.
  const fresh = !Number.isNaN(metricsAt) && now - metricsAt <= staleAfterMs;
  const kv = table.getFloat(row, F.KV_USAGE);
  const circuit = table.getInt(row, I.CIRCUIT);
  return {
    index: row,
    id: d.id,
    pool: d.poolName,
    models: d.models,
    ready: table.getInt(row, I.READY) === 1,
    draining: table.getInt(row, I.DRAINING) === 1,
    circuitOpen: circuit !== CIRCUIT_CLOSED && circuit !== CIRCUIT_HALF_OPEN,
    gpuFaulted: table.getInt(row, I.GPU_FAULTED) === 1,
    waiting: fresh ? table.optionalInt(row, I.WAITING) : undefined,
    running: fresh ? table.optionalInt(row, I.RUNNING) : undefined,
    kvUsage: fresh && !Number.isNaN(kv) ? kv : undefined,
    inflight: table.getInt(row, I.INFLIGHT),
  };
}
