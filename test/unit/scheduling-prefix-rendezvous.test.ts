/** Scorer prefix-rendezvous: every gateway sends a prefix to the same replica (same answer whatever the slot numbers or order), only a leaving replica's prefixes move, and prefixes spread over replicas. */
import { describe, expect, test } from "bun:test";
import { SCORERS } from "../../src/scheduling/plugin-registry.ts";
import { prefixHashes } from "../../src/scheduling/prefix-hash.ts";
import { PrefixIndex } from "../../src/scheduling/prefix-index.ts";
import { SchedulingProfile } from "../../src/scheduling/profile.ts";
import type { EndpointView } from "../../src/scheduling/types.ts";
import { endpoint, schedulingContext, seeded } from "../helpers/scheduling.ts";

const s = SCORERS["prefix-rendezvous"];
const ctx = schedulingContext(new PrefixIndex(64));
const replicas = (ids: string[], firstIndex = 0): EndpointView[] => ids.map((id, i) => endpoint(firstIndex + i, { id }));
const winner = (hash: number, es: EndpointView[]) => es[s.score({ model: "m", prefixHashes: [hash, 7, 8] }, es, ctx).indexOf(1)]!.id;
const hashes = Array.from({ length: 3_000 }, (_, i) => prefixHashes(`system prompt number ${i} `.repeat(20), 64, 2)[0]!);

describe("prefix-rendezvous", () => {
  test("one candidate scores 1, the rest 0; no hashes: 0 everywhere", () => {
    const es = replicas(["fl-a", "fl-b", "fl-c"]);
    const scores = s.score({ model: "m", prefixHashes: [hashes[0]!] }, es, ctx);
    expect(scores.filter((x) => x === 1).length).toBe(1);
    expect(scores.filter((x) => x === 0).length).toBe(2);
    expect(s.score({ model: "m", prefixHashes: [] }, es, ctx)).toEqual([0, 0, 0]);
  });

  test("gateways agree: the choice depends on the ids, not on slot numbers or candidate order", () => {
    const gw1 = replicas(["fl-a", "fl-b", "fl-c"]);
    const gw2 = replicas(["fl-c", "fl-a", "fl-b"], 40);
    for (const h of hashes.slice(0, 200)) expect(winner(h, gw2)).toBe(winner(h, gw1));
  });

  test("a replica leaving moves only its own prefixes; prefixes spread evenly", () => {
    const all = replicas(["fl-a", "fl-b", "fl-c", "fl-d"]);
    const without = all.filter((e) => e.id !== "fl-c");
    const counts: Record<string, number> = {};
    for (const h of hashes) {
      const before = winner(h, all);
      counts[before] = (counts[before] ?? 0) + 1;
      if (before !== "fl-c") expect(winner(h, without)).toBe(before);
    }
    for (const id of ["fl-a", "fl-b", "fl-c", "fl-d"]) expect(counts[id]! / hashes.length).toBeGreaterThan(0.2);
  });

  test("in a profile, the load scorers still override it when its replica is much busier", () => {
    const profile = new SchedulingProfile({
      filters: ["serves-model", "ready"],
      scorers: [
        { name: "prefix-rendezvous", weight: 3 },
        { name: "inflight", weight: 2 },
        { name: "queue-depth", weight: 2 },
      ],
      picker: "max-score",
      prefixAffinity: { blockChars: 64, maxBlocks: 2, lruEntries: 64 },
      cacheAffinity: { threshold: 0.8, peakPrefillTokensPerS: 15_928, maxTtftPenaltyMs: 18_000 },
    });
    const req = { model: "m", prefixHashes: [hashes[1]!] };
    const idle = replicas(["fl-a", "fl-b", "fl-c"]);
    const chosen = profile.schedule(req, idle, seeded(1)).endpoint!.id;
    expect(profile.schedule(req, idle, seeded(2)).endpoint!.id).toBe(chosen);
    const busy = idle.map((e) => (e.id === chosen ? { ...e, inflight: 30, waiting: 20 } : e));
    expect(profile.schedule(req, busy, seeded(3)).endpoint!.id).not.toBe(chosen);
  });
});
