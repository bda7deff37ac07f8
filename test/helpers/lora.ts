/** Scheduling settings as the config's defaults give them (with lora-affinity and serves-adapter), for LoRA tests. */
import { schedulingSchema } from "../../src/config/schema.ts";
import type { SchedulingConfig } from "../../src/scheduling/profile.ts";

export function parseSchedulingForTest(): SchedulingConfig {
  const w = schedulingSchema.parse({});
  return {
    filters: w.filters,
    scorers: w.scorers,
    picker: w.picker,
    prefixAffinity: { blockChars: w.prefix_affinity.block_chars, maxBlocks: w.prefix_affinity.max_blocks, lruEntries: w.prefix_affinity.lru_entries },
    cacheAffinity: { threshold: 0.8, peakPrefillTokensPerS: 15_928, maxTtftPenaltyMs: 18_000 },
  };
}
