/**
 * Queue depth per pool and band, read from the pool table at scrape time. The
 * scheduler worker publishes, per (pool, band), how many requests wait in
 * that band or a higher one (`queuedAhead`, cumulative from the top band), so
 * the depth of band b is ahead[b] − ahead[b−1].
 */
import { Gauge, type Registry } from "prom-client";
import type { PoolTable } from "../shared/endpoint-table.ts";
import { FLEET } from "./names.ts";

/** Requests waiting in each band of one pool (band order as configured, highest priority first). */
export function bandDepths(pools: Pick<PoolTable, "queuedAhead" | "bands">, pool: number): number[] {
  const out: number[] = [];
  let above = 0;
  for (let b = 0; b < pools.bands; b++) {
    const ahead = pools.queuedAhead(pool, b);
    // A read racing the worker's publish can see a later band's sum before an earlier one's: never below 0.
    out.push(Math.max(0, ahead - above));
    above = ahead;
  }
  return out;
}

/** Register llmgw_pool_queue_depth{pool,band}; `pools` lists the live pools (row and name) at scrape time. */
export function registerPoolCollector(
  registry: Registry,
  table: Pick<PoolTable, "queuedAhead" | "bands">,
  bandNames: readonly string[],
  pools: () => Iterable<{ index: number; name: string }>,
): void {
  new Gauge<"pool" | "band">({
    name: FLEET.poolQueueDepth.name,
    help: FLEET.poolQueueDepth.help,
    labelNames: FLEET.poolQueueDepth.labels,
    registers: [registry],
    collect() {
      this.reset();
      for (const { index, name } of pools()) bandDepths(table, index).forEach((depth, b) => this.set({ pool: name, band: bandNames[b] ?? String(b) }, depth));
    },
  });
}
