/**
 * Gate 7: a request naming a LoRA adapter (after the cold-start gate,
 * before admission). It notes the request (the fleet loads adapters where their
 * requests arrive). When the adapter is one the fleet declares and no
 * replica has it loaded yet, the request asks the fleet to load it and
 * waits — at most fleet.adapter_load_wait_ms, and never past its client —
 * for a replica to list it; then it is routed as any other. Every other
 * request passes with one map lookup and no promise.
 */
import { LlmgwError } from "../../shared/errors.ts";
import type { AdapterCatalog } from "../adapter-catalog.ts";
import type { ModelCatalog } from "../model-catalog.ts";
import type { Exchange } from "../request/exchange.ts";

/** How the gate asks the fleet to load an adapter, and how long a request waits for it. */
interface AdapterLoads {
  requested(adapter: string): void;
  readonly waitMs: number;
}

/** What the adapter-load gate uses: the catalog's LoRA adapters, and how to ask the fleet for one (absent: no fleet). */
export interface AdapterLoadGateDeps {
  readonly catalog: Pick<ModelCatalog, "adapters">;
  readonly adapterLoads?: AdapterLoads;
}

/** `model`: the request's (canonical). */
export function adapterLoadGate(ctx: AdapterLoadGateDeps, x: Exchange, model: string): Promise<void> | undefined {
  const adapters = ctx.catalog.adapters;
  if (adapters === undefined || !adapters.isAdapter(model)) return undefined;
  adapters.noteRequest(model, Date.now());
  const loads = ctx.adapterLoads;
  if (loads === undefined || !adapters.isDeclared(model) || adapters.listedAnywhere(model)) return undefined;
  return waitForLoad(adapters, x, model, loads);
}

async function waitForLoad(adapters: AdapterCatalog, x: Exchange, model: string, loads: AdapterLoads): Promise<void> {
  const listed = adapters.whenListed(model, x.signal, loads.waitMs);
  loads.requested(model);
  if (await listed) return;
  if (x.signal.aborted) throw new LlmgwError("INTERNAL_ERROR", "client went away while its adapter was being loaded");
  throw new LlmgwError(
    "NO_READY_ENDPOINT",
    `the LoRA adapter '${model}' is not loaded on any replica yet (the fleet is loading it; waited ${loads.waitMs} ms)`,
    { retryAfterS: 1 },
  );
}
