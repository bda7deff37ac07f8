/**
 * A scheduling profile: the configured filters, weighted scorers and picker
 * run in order for one request, plus the prefix-affinity index they share.
 * Runs for every request in the scheduler worker, so it keeps allocations
 * to the candidate lists, one score array per scorer and the result.
 */
import type { Config } from "../config/types.ts";
import { uncachedTokens } from "./cached-share.ts";
import { EXCLUDE_FILTER_NAME, excludeTried } from "./filters/exclude.ts";
import { SCHEDULING_REGISTRY, type SchedulingRegistry } from "./plugin-registry.ts";
import { PrefixIndex } from "./prefix-index.ts";
import { profileInputs } from "./profile-inputs.ts";
import type { Decision, EndpointView, Filter, KvBlockIndexReader, Picker, RequestView, SchedulingContext, Scorer } from "./types.ts";

export type SchedulingConfig = Config["scheduling"];

interface WeightedScorer {
  readonly scorer: Scorer;
  readonly weight: number;
}

const NO_SCORES: Readonly<Record<string, number>> = Object.freeze({});

/** No engine publishes KV events: precise-prefix's stand-in decides everywhere. */
const NO_KV_INDEX: KvBlockIndexReader = Object.freeze({ live: () => false, matchedBlocks: () => 0 });

export class SchedulingProfile {
  readonly prefixIndex: PrefixIndex;
  readonly prefixAffinity: Readonly<SchedulingConfig["prefixAffinity"]>;
  private readonly filters: readonly Filter[];
  private readonly scorers: readonly WeightedScorer[];
  private readonly picker: Picker;
  private readonly ctx: SchedulingContext;
  /** A plugin reads `prefill-load`: each decision says how much prompt the chosen endpoint lacks, for its claim. */
  readonly tracksPrefill: boolean;
  /** Decisions made so far: the turn a round-robin picker serves (per profile, so per thread). */
  private turns = 0;

  /**
   * `registry` is for tests that need a misbehaving plugin; production uses the
   * one registry. `prefixIndex`: the index to share with other threads (a view
   * of the same SharedArrayBuffer); a private one by default. `kvIndex`: what
   * the engines' KV-cache events say (a view of the KV-events worker's
   * index); by default none is live.
   */
  constructor(
    config: SchedulingConfig,
    registry: SchedulingRegistry = SCHEDULING_REGISTRY,
    prefixIndex?: PrefixIndex,
    kvIndex: KvBlockIndexReader = NO_KV_INDEX,
  ) {
    this.filters = config.filters.map((name) => registry.filters[name]);
    this.scorers = config.scorers.map(({ name, weight }) => {
      if (!Number.isFinite(weight) || weight < 0) throw new RangeError(`scheduling.scorers: weight of '${name}' must be a finite number ≥ 0, got ${weight}`);
      return { scorer: registry.scorers[name], weight };
    });
    this.picker = registry.pickers[config.picker];
    this.prefixAffinity = Object.freeze({ ...config.prefixAffinity });
    this.prefixIndex = prefixIndex ?? new PrefixIndex(config.prefixAffinity.lruEntries);
    const affinity = config.cacheAffinity;
    this.ctx = {
      prefixIndex: this.prefixIndex,
      kvIndex,
      preciseStandIn: config.preciseStandIn ?? "prefix-affinity",
      cacheAffinity: { threshold: affinity.threshold, maxLeadTokens: (affinity.peakPrefillTokensPerS * affinity.maxTtftPenaltyMs) / 1000 },
    };
    this.tracksPrefill = profileInputs(config, registry).has("prefill-load");
  }

  /**
   * Chooses an endpoint for `req` among `endpoints`: exclude (endpoints
   * already tried) → filters, counting each one's drops → scorers, each
   * score clamped to [0,1] with NaN as 0 → weighted totals → picker. A
   * successful pick records the request's prefix hashes for the chosen
   * endpoint, so the next request with that prefix is drawn to it.
   * `Decision.drops` has a key for `exclude` and every configured filter
   * (0 when it dropped nothing); `Decision.scores` has every configured
   * scorer's unweighted score for the chosen endpoint, or is empty when
   * none was chosen.
   */
  schedule(req: RequestView, endpoints: readonly EndpointView[], random: () => number = Math.random): Decision {
    const drops: Record<string, number> = {};
    let candidates: readonly EndpointView[] = endpoints;
    if (req.exclude !== undefined && req.exclude.size > 0) candidates = excludeTried.filter(req, endpoints, this.ctx);
    drops[EXCLUDE_FILTER_NAME] = endpoints.length - candidates.length;
    for (const f of this.filters) {
      if (candidates.length === 0) {
        drops[f.name] = 0;
        continue;
      }
      const kept = f.filter(req, candidates, this.ctx);
      drops[f.name] = candidates.length - kept.length;
      candidates = kept;
    }
    const n = candidates.length;
    if (n === 0) return { endpoint: undefined, drops, scores: NO_SCORES, candidates: 0, prefillTokens: 0 };

    const perScorer: number[][] = new Array<number[]>(this.scorers.length);
    const totals = new Array<number>(n).fill(0);
    for (let s = 0; s < this.scorers.length; s++) {
      const { scorer, weight } = this.scorers[s]!;
      const raw = scorer.score(req, candidates, this.ctx);
      for (let i = 0; i < n; i++) {
        const v = clampScore(raw[i]);
        raw[i] = v;
        totals[i]! += weight * v;
      }
      perScorer[s] = raw;
    }

    const endpoint = this.picker.pick(candidates, totals, random, this.turns++);
    if (endpoint === undefined) return { endpoint: undefined, drops, scores: NO_SCORES, candidates: n, prefillTokens: 0 };
    const at = candidates.indexOf(endpoint);
    const scores: Record<string, number> = {};
    for (let s = 0; s < this.scorers.length; s++) scores[this.scorers[s]!.scorer.name] = perScorer[s]![at] ?? 0;
    // Read before the prefix is recorded for the endpoint, which would make it look cached there.
    const prefillTokens = this.tracksPrefill ? uncachedTokens(req, endpoint, this.ctx) : 0;
    if (req.prefixHashes.length > 0) this.prefixIndex.record(req.prefixHashes, endpoint.index);
    return { endpoint, drops, scores, candidates: n, prefillTokens };
  }

  /** An endpoint went away or restarted with an empty cache: stop drawing its old prefixes to it. */
  forgetEndpoint(index: number): void {
    this.prefixIndex.forgetEndpoint(index);
  }
}

/** Scores outside [0,1] are clamped; NaN, undefined (a short score array) become 0. */
function clampScore(v: number | undefined): number {
  if (v === undefined || !(v > 0)) return 0; // also NaN
  return v >= 1 ? 1 : v;
}
