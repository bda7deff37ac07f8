/** Builds the scheduling view of an endpoint from the shared endpoint table, treating stale metrics as absent. */

import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";
import type { AdapterView, EndpointView } from "../scheduling/types.ts";
import { CIRCUIT_CLOSED, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING, type EndpointTable, F, I, modelCircuitField } from "../shared/endpoint-table.ts";
import type { LoraTable } from "../shared/lora-table.ts";

/**
 * Whether a circuit state keeps requests out: open, or half-open with its
 * single probe already taken — unless the request joins a probed circuit
 * (nothing else is left for it: turning it away would help no one).
 */
function keepsOut(state: number, joinProbing: boolean): boolean {
  return state !== CIRCUIT_CLOSED && state !== CIRCUIT_HALF_OPEN && !(joinProbing && state === CIRCUIT_PROBING);
}

function capacityOf(capacity: number): { capacity?: number } {
  return capacity > 0 ? { capacity } : {};
}

/** Whether the endpoint's engine metrics are recent enough to describe now. */
function metricsFresh(table: EndpointTable, row: number, now: number, staleAfterMs: number): boolean {
  const metricsAt = table.getFloat(row, F.METRICS_AT);
  return !Number.isNaN(metricsAt) && now - metricsAt <= staleAfterMs;
}

/** What endpoint `row` holds of adapter `id`; the running and waiting bits and the slot counts only while its metrics are fresh. */
function readAdapterView(lora: LoraTable, row: number, id: number, fresh: boolean): AdapterView {
  const maxLoras = fresh ? lora.maxLoras(row) : undefined;
  const known = maxLoras !== undefined;
  const at = known ? lora.recency(row, id) : -1;
  return {
    registered: lora.has(row, "registered", id),
    running: fresh && lora.has(row, "running", id),
    waiting: fresh && lora.has(row, "waiting", id),
    resident: at >= 0 && at < (maxLoras ?? 0),
    active: known ? lora.active(row) : undefined,
    runningAdapters: known ? lora.count(row, "running") : undefined,
    maxLoras,
  };
}

/** The view of endpoint `d` for a request of `model` (its circuit is the endpoint's and that model's), and of its adapter when it names one. */
export function readEndpointView(
  table: EndpointTable,
  d: EndpointDescriptor,
  now: number,
  staleAfterMs: number,
  model?: string,
  joinProbing = false,
  adapter?: { lora: LoraTable; id: number },
): EndpointView {
  const row = d.index;
  // Engine metrics lag by a scrape interval at best; past the stale limit they
  // describe a different moment and are treated as absent, not as idle.
  const fresh = metricsFresh(table, row, now, staleAfterMs);
  const kv = table.getFloat(row, F.KV_USAGE);
  const circuit = table.getInt(row, I.CIRCUIT);
  const modelField = model === undefined ? -1 : modelCircuitField(d.models.indexOf(model));
  const modelCircuit = modelField < 0 ? CIRCUIT_CLOSED : table.getInt(row, modelField);
  return {
    index: row,
    id: d.id,
    pool: d.poolName,
    models: d.models,
    ready: table.getInt(row, I.READY) === 1,
    draining: table.getInt(row, I.DRAINING) === 1,
    circuitOpen: keepsOut(circuit, joinProbing) || keepsOut(modelCircuit, joinProbing),
    gpuFaulted: table.getInt(row, I.GPU_FAULTED) === 1,
    waiting: fresh ? table.optionalInt(row, I.WAITING) : undefined,
    running: fresh ? table.optionalInt(row, I.RUNNING) : undefined,
    kvUsage: fresh && !Number.isNaN(kv) ? kv : undefined,
    inflight: table.getInt(row, I.INFLIGHT),
    prefillTokens: table.getInt(row, I.PREFILL_TOKENS),
    ...capacityOf(table.getInt(row, I.CAPACITY)),
    ...(adapter ? { adapter: readAdapterView(adapter.lora, row, adapter.id, fresh) } : {}),
  };
}
