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
    ...over,
  };
}
