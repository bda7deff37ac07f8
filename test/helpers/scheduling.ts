/** Literal scheduling data shared by the scheduling tests. */
import type { EndpointView } from "../../src/scheduling/types.ts";

/** Deterministic PRNG (mulberry32) so picks are reproducible. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A ready, idle endpoint serving "m", with overrides. */
export function endpoint(index: number, over: Partial<EndpointView> = {}): EndpointView {
  return {
    index,
    id: `e${index}`,
    pool: "default",
    models: ["m"],
    ready: true,
    draining: false,
    circuitOpen: false,
    gpuFaulted: false,
    waiting: 0,
    running: 0,
    kvUsage: 0,
    inflight: 0,
    prefillTokens: 0,
    ...over,
  };
}

import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { PrefixIndex } from "../../src/scheduling/prefix-index.ts";
import type { SchedulingContext } from "../../src/scheduling/types.ts";
import { KV_STREAM, KvEventStats } from "../../src/shared/kv-event-stats.ts";

/** A real KV-block index holding `held` (endpoint → its token-block keys) with the `live` endpoints' streams live. */
export function kvIndexWith(held: Record<number, readonly number[]>, live: readonly number[] = Object.keys(held).map(Number)): KvBlockIndex {
  const stats = new KvEventStats(64);
  for (const e of live) stats.setState(e, KV_STREAM.LIVE);
  const index = new KvBlockIndex(1024, stats);
  index.write(() => {
    for (const [endpoint, keys] of Object.entries(held)) for (const k of keys) index.insert(k, Number(endpoint));
  });
  return index;
}

/** The cache-affinity filter's default settings (config/defaults.ts): warm at 0.8, a lead of 15,928 × 18 s. */
export const CACHE_AFFINITY: SchedulingContext["cacheAffinity"] = { threshold: 0.8, maxLeadTokens: 15_928 * 18 };

/** A scheduling context over a prefix index (and a KV-block index: none live by default). */
export function schedulingContext(
  prefixIndex = new PrefixIndex(64),
  kvIndex = kvIndexWith({}),
  preciseStandIn: SchedulingContext["preciseStandIn"] = "prefix-affinity",
): SchedulingContext & { prefixIndex: PrefixIndex } {
  return { prefixIndex, kvIndex, preciseStandIn, cacheAffinity: CACHE_AFFINITY };
}
