/**
 * Sticky until saturated: the cache-affinity filter keeps a prompt on the
 * endpoints that hold it until their prefill work in flight leads a colder
 * endpoint's by the configured lead; token-load picks the least prefill work,
 * this prompt's uncached part included; the chooser's claim adds what the
 * chosen endpoint lacks to its prefill load, and the first token (or the
 * release) takes it off exactly once.
 */
import { describe, expect, test } from "bun:test";
import { EndpointChooser } from "../../src/admission/chooser.ts";
import { EndpointDirectory } from "../../src/admission/endpoint-directory.ts";
import { buildConfig } from "../../src/config/load.ts";
import { cacheAffinity } from "../../src/scheduling/filters/cache-affinity.ts";
import { PrefixIndex } from "../../src/scheduling/prefix-index.ts";
import { SchedulingProfile } from "../../src/scheduling/profile.ts";
import { profileInputs } from "../../src/scheduling/profile-inputs.ts";
import { tokenLoad } from "../../src/scheduling/scorers/token-load.ts";
import type { RequestView } from "../../src/scheduling/types.ts";
import { EndpointTable, I } from "../../src/shared/endpoint-table.ts";
import { endpoint, kvIndexWith, schedulingContext } from "../helpers/scheduling.ts";

/** Endpoint 1 holds all four of the prompt's blocks, endpoint 2 one of them, 0 and 3 none (KV events live everywhere). */
const ctx = () => schedulingContext(new PrefixIndex(64), kvIndexWith({ 0: [], 1: [1, 2, 3, 4], 2: [1], 3: [] }, [0, 1, 2, 3]));
const req: RequestView = { model: "m", prefixHashes: [], tokenBlockKeys: [1, 2, 3, 4], promptTokens: 10_000 };
const lead = 15_928 * 18;
const ids = (es: readonly { index: number }[]) => es.map((e) => e.index);

describe("cache-affinity", () => {
  test("keeps only the warm endpoints (holding at least 80 % of the prompt)", () => {
    const fleet = [0, 1, 2, 3].map((i) => endpoint(i));
    expect(ids(cacheAffinity.filter(req, fleet, ctx()))).toEqual([1]);
  });

  test("keeps everything when no endpoint is warm, or when all are", () => {
    const fleet = [0, 2, 3].map((i) => endpoint(i));
    expect(ids(cacheAffinity.filter(req, fleet, ctx()))).toEqual([0, 2, 3]);
    expect(ids(cacheAffinity.filter(req, [endpoint(1)], ctx()))).toEqual([1]);
  });

  test("a cold endpoint rejoins once the warm one's prefill work in flight leads its own by the configured lead, not before", () => {
    const almost = [endpoint(0, { prefillTokens: 0 }), endpoint(1, { prefillTokens: lead - 1 }), endpoint(3, { prefillTokens: 5 })];
    expect(ids(cacheAffinity.filter(req, almost, ctx()))).toEqual([1]);
    const saturated = [endpoint(0, { prefillTokens: 0 }), endpoint(1, { prefillTokens: lead + 3 }), endpoint(3, { prefillTokens: 5 })];
    expect(ids(cacheAffinity.filter(req, saturated, ctx()))).toEqual([0, 1]);
  });

  test("the lead is peak prefill throughput × the TTFT penalty, from config", () => {
    const config = buildConfig({ scheduling: { cache_affinity: { peak_prefill_tokens_per_s: 1000, max_ttft_penalty_ms: 2000 } } });
    expect(config.scheduling.cacheAffinity).toEqual({ threshold: 0.8, peakPrefillTokensPerS: 1000, maxTtftPenaltyMs: 2000 });
    expect(() => buildConfig({ scheduling: { cache_affinity: { threshold: 0 } } })).toThrow(/threshold/);
  });
});

describe("token-load", () => {
  test("counts this prompt's uncached part: a warm endpoint with some work beats an idle cold one until its work passes what it saves", () => {
    // Warm endpoint 1 saves the whole 10,000-token prompt; idle cold endpoint 0 would prefill all of it.
    const light = tokenLoad.score(req, [endpoint(0), endpoint(1, { prefillTokens: 9_000 })], ctx());
    expect(light[1]).toBeGreaterThan(light[0]!);
    const heavy = tokenLoad.score(req, [endpoint(0), endpoint(1, { prefillTokens: 11_000 })], ctx());
    expect(heavy[0]).toBeGreaterThan(heavy[1]!);
  });

  test("the least load scores 1, equal loads all 1, and a partly warm endpoint sits between", () => {
    const s = tokenLoad.score(req, [endpoint(0), endpoint(1), endpoint(2)], ctx());
    expect(s[1]).toBe(1);
    expect(s[2]).toBeGreaterThan(s[0]!);
    expect(s[2]).toBeLessThan(1);
    expect(tokenLoad.score({ model: "m", prefixHashes: [] }, [endpoint(0), endpoint(3)], ctx())).toEqual([1, 1]);
  });
});

describe("the prefill load the claims keep", () => {
  function fleet(scheduling: Record<string, unknown>) {
    const config = buildConfig({
      endpoints: [0, 1].map((i) => ({ id: `e${i}`, url: `http://127.0.0.1:${9000 + i}`, models: ["m"] })),
      scheduling,
    });
    const table = new EndpointTable(4);
    const descriptors = [0, 1].map((i) => ({ index: i, id: `e${i}`, pool: 0, poolName: "default", models: ["m"] }));
    for (const d of descriptors) table.setInt(d.index, I.READY, 1);
    const chooser = new EndpointChooser(table, new EndpointDirectory(descriptors), new SchedulingProfile(config.scheduling), 60_000);
    return { table, chooser };
  }
  const tokenAware = { filters: ["serves-model", "ready", "cache-affinity"], scorers: [{ name: "token-load", weight: 1 }] };

  test("a claim adds the prompt tokens the chosen endpoint lacks; the next prompt goes to the other endpoint", () => {
    const { table, chooser } = fleet(tokenAware);
    const a = chooser.choose({ model: "m", prefixHashes: [], promptTokens: 7_000 });
    expect(a.ok && a.prefillTokens).toBe(7_000);
    const first = a.ok ? a.index : -1;
    expect(table.getInt(first, I.PREFILL_TOKENS)).toBe(7_000);
    const b = chooser.choose({ model: "m", prefixHashes: [], promptTokens: 100 });
    expect(b.ok && b.index).toBe(1 - first);
    expect(table.getInt(1 - first, I.PREFILL_TOKENS)).toBe(100);
  });

  test("a profile that reads no prefill load adds nothing", () => {
    const { table, chooser } = fleet({});
    expect(profileInputs(buildConfig({}).scheduling).has("prefill-load")).toBe(false);
    const a = chooser.choose({ model: "m", prefixHashes: [], promptTokens: 7_000 });
    expect(a.ok && a.prefillTokens).toBe(0);
    expect(table.getInt(0, I.PREFILL_TOKENS) + table.getInt(1, I.PREFILL_TOKENS)).toBe(0);
  });
});
