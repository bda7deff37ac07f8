/**
 * Gate 6: a request naming a LoRA adapter (after batch shed, before
 * admission). It notes the request (the fleet loads adapters where their
 * requests arrive). When the adapter is one the fleet declares and no
 * replica has it loaded yet, the request asks the fleet to load it and
 * waits — at most fleet.adapter_load_wait_ms, and never past its client —
 * for a replica to list it; then it is routed as any other. Every other
 * request passes with one map lookup and no promise.
 */
import { LlmgwError } from "../../shared/errors.ts";
import type { GatewayContext } from "../context.ts";
import type { Exchange } from "../request/exchange.ts";

/** `model`: the request's (canonical). */
export function adapterLoadGate(ctx: GatewayContext, x: Exchange, model: string): Promise<void> | undefined {
  const adapters = ctx.catalog.adapters;
  if (adapters === undefined || !adapters.isAdapter(model)) return undefined;
  adapters.noteRequest(model, Date.now());
  const loads = ctx.adapterLoads;
  if (loads === undefined || !adapters.isDeclared(model) || adapters.listedAnywhere(model)) return undefined;
  return waitForLoad(ctx, x, model, loads);
}

async function waitForLoad(ctx: GatewayContext, x: Exchange, model: string, loads: NonNullable<GatewayContext["adapterLoads"]>): Promise<void> {
  const listed = ctx.catalog.adapters!.whenListed(model, x.signal, loads.waitMs);
  loads.requested(model);
  if (await listed) return;
  if (x.signal.aborted) throw new LlmgwError("INTERNAL_ERROR", "client went away while its adapter was being loaded");
  throw new LlmgwError("NO_READY_ENDPOINT", `the LoRA adapter '${model}' is not loaded on any replica yet (the fleet is loading it; waited ${loads.waitMs} ms)`, { retryAfterS: 1 });
}
