/**
 * What the fleet sees of an endpoint's LoRA adapters: the names its
 * /v1/models lists (the adapter catalog) and, of those, the ones running and
 * queued there (the shared LoRA table, while its metrics are fresh).
 */
import type { EndpointAdapters } from "../control/endpoint-sink.ts";
import type { AdapterCatalog } from "../gateway/adapter-catalog.ts";
import { type EndpointTable, F } from "../shared/endpoint-table.ts";
import type { LoraTable } from "../shared/lora-table.ts";

export function endpointAdaptersReader(
  catalog: AdapterCatalog,
  lora: LoraTable,
  table: EndpointTable,
  staleAfterMs: number,
  now: () => number = Date.now,
): (slot: number) => EndpointAdapters | undefined {
  return (slot) => {
    const at = table.getFloat(slot, F.METRICS_AT);
    if (Number.isNaN(at)) return undefined;
    const fresh = now() - at <= staleAfterMs;
    const listed = catalog.of(slot).map((a) => a.name);
    const bit = (set: "running" | "waiting") => (name: string) => {
      const id = catalog.route(name)?.id;
      return fresh && id !== undefined && id >= 0 && lora.has(slot, set, id);
    };
    const max = fresh ? lora.maxLoras(slot) : undefined;
    return {
      listed,
      running: listed.filter(bit("running")),
      waiting: listed.filter(bit("waiting")),
      slotsFull: max !== undefined && lora.count(slot, "running") >= max,
    };
  };
}
