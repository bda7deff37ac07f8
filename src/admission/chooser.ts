/**
 * Chooses the endpoint for one request and claims it: the scheduling profile
 * over the live endpoint table (filters → scorers → picker), then the claim in
 * the table — the half-open circuit's probe slot by compare-and-swap, and the
 * endpoint's in-flight count (and, when the profile reads it, its prefill
 * load) by Atomics.add — so a burst sees its own claims.
 * The main thread (fast path) and the scheduler worker (queued requests) run
 * this same code over the same shared memory, so they make the same choices.
 */
import type { SchedulingProfile } from "../scheduling/profile.ts";
import type { EndpointView, RequestView } from "../scheduling/types.ts";
import { CIRCUIT_HALF_OPEN, CIRCUIT_PROBING, type EndpointTable, I, modelCircuitField } from "../shared/endpoint-table.ts";
import type { LoraTable } from "../shared/lora-table.ts";
import type { DecisionRecorder } from "./decision-record.ts";
import type { EndpointDirectory } from "./endpoint-directory.ts";
import { readEndpointView } from "./endpoint-views.ts";

/** What scoring reads of a request's prompt: prefix hashes of its text, and token-block keys of its token ids when it was tokenized. */
export interface RoutingKeys {
  prefixHashes: readonly number[];
  tokenBlockKeys?: readonly number[];
  /** The prompt's estimated tokens (what the prefill-load signal counts); absent or 0 when unknown. */
  promptTokens?: number;
}

export interface ChooseRequest extends RoutingKeys {
  /** The model endpoints serve: for a request naming a LoRA adapter, the adapter's base. */
  model: string;
  /** Endpoints the request already tried (retries exclude them). */
  exclude?: ReadonlySet<number>;
  /**
   * Nothing else is left for the request (no fallback model after this one):
   * when the only candidates are half-open circuits whose single probe is
   * taken, it goes to one of them too rather than being turned away.
   */
  lastResort?: boolean;
  /** The request's LoRA adapter (its id in the adapter-name table); absent for a base-model request. */
  adapter?: number;
}

type Choice =
  | {
      ok: true;
      index: number;
      pool: number;
      scores: Readonly<Record<string, number>>;
      drops: Readonly<Record<string, number>>;
      /** Endpoints scored (left after the filters). */
      candidates: number;
      /** The circuit field whose single probe slot this request took, or -1. */
      probe: number;
      /** The circuit field of the request's model on this endpoint, or -1 (the endpoint's own stands for it). */
      circuit: number;
      /** Uncached prompt tokens the claim added to the endpoint's prefill load (0 unless the profile reads it); whoever lets go of the claim takes them off. */
      prefillTokens: number;
    }
  | { ok: false; drops: Readonly<Record<string, number>> };

/** What scoring sees of the request (fields set one by one: a request's hot path, no spread copies). */
function requestView(req: ChooseRequest, exclude: ReadonlySet<number> | undefined): RequestView {
  const v: { -readonly [K in keyof RequestView]: RequestView[K] } = { model: req.model, prefixHashes: req.prefixHashes };
  if (exclude !== undefined) v.exclude = exclude;
  if (req.tokenBlockKeys !== undefined) v.tokenBlockKeys = req.tokenBlockKeys;
  if (req.adapter !== undefined) v.adapter = req.adapter;
  if (req.promptTokens !== undefined) v.promptTokens = req.promptTokens;
  return v;
}

/** A draw from `random`, kept in `draws`. */
function drawn(draws: number[], random: () => number): number {
  const v = random();
  draws.push(v);
  return v;
}

/** How often a lost probe race is re-decided before giving up (each loss removes one candidate). */
const MAX_PROBE_RACES = 4;

export class EndpointChooser {
  constructor(
    private readonly table: EndpointTable,
    private readonly directory: EndpointDirectory,
    private profile: SchedulingProfile,
    private readonly staleAfterMs: number,
    /** LoRA adapters per endpoint (absent: adapters are not scored, every endpoint looks the same for them). */
    private readonly lora?: LoraTable,
    /** Writes each decision down (LLMGW_RECORD_DECISIONS); absent: nothing is recorded. */
    private readonly recorder?: { readonly thread: string; readonly to: DecisionRecorder },
  ) {}

  /** Scheduling settings of a reloaded config: the next choice uses them (a choice is synchronous, so none is half made). */
  useProfile(profile: SchedulingProfile): void {
    this.profile = profile;
  }

  /**
   * Choose and claim (in-flight +1) an endpoint serving `req.model`; the
   * caller owns the claim. A half-open circuit takes one request at a time
   * (its probe); the others go to another candidate, or — a last resort —
   * join it.
   */
  choose(req: ChooseRequest, random: () => number = Math.random, now = Date.now()): Choice {
    const c = this.chooseAmong(req, false, random, now);
    if (c.ok || req.lastResort !== true) return c;
    const joined = this.chooseAmong(req, true, random, now);
    return joined.ok ? joined : c;
  }

  private chooseAmong(req: ChooseRequest, joinProbing: boolean, random: () => number, now: number): Choice {
    const serving = this.directory.serving(req.model);
    const views: EndpointView[] = new Array<EndpointView>(serving.length);
    const adapter = req.adapter !== undefined && this.lora ? { lora: this.lora, id: req.adapter } : undefined;
    for (let i = 0; i < serving.length; i++) views[i] = readEndpointView(this.table, serving[i]!, now, this.staleAfterMs, req.model, joinProbing, adapter);
    let exclude = req.exclude;
    for (let race = 0; ; race++) {
      const reqView = requestView(req, exclude);
      const draws: number[] | undefined = this.recorder ? [] : undefined;
      const decision = this.profile.schedule(reqView, views, draws ? () => drawn(draws, random) : random);
      if (this.recorder && draws) this.record(this.recorder, reqView, views, draws, decision.endpoint?.index ?? null, now);
      const chosen = decision.endpoint;
      if (!chosen) return { ok: false, drops: decision.drops };
      const row = chosen.index;
      const circuit = modelCircuitField(chosen.models.indexOf(req.model));
      // A half-open circuit (the endpoint's, or its model's) admits exactly one
      // probe. The other thread may have taken it since the view was read:
      // then the endpoint is out for us too.
      const half =
        this.table.getInt(row, I.CIRCUIT) === CIRCUIT_HALF_OPEN
          ? I.CIRCUIT
          : circuit >= 0 && this.table.getInt(row, circuit) === CIRCUIT_HALF_OPEN
            ? circuit
            : -1;
      let probe = -1;
      if (half >= 0) {
        if (this.table.casInt(row, half, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING)) probe = half;
        else if (joinProbing && this.table.getInt(row, half) === CIRCUIT_PROBING)
          probe = -1; // joins the request probing it
        else if (race < MAX_PROBE_RACES) {
          exclude = new Set([...(exclude ?? []), row]);
          continue;
        } else return { ok: false, drops: decision.drops };
      }
      this.table.addInt(row, I.INFLIGHT, 1);
      if (decision.prefillTokens > 0) this.table.addInt(row, I.PREFILL_TOKENS, decision.prefillTokens);
      if (adapter) adapter.lora.touch(row, adapter.id);
      return {
        ok: true,
        index: row,
        pool: this.directory.get(row)?.pool ?? 0,
        scores: decision.scores,
        drops: decision.drops,
        candidates: decision.candidates,
        probe,
        circuit,
        prefillTokens: decision.prefillTokens,
      };
    }
  }

  private record(
    recorder: { readonly thread: string; readonly to: DecisionRecorder },
    req: RequestView,
    views: readonly EndpointView[],
    draws: number[],
    pick: number | null,
    now: number,
  ): void {
    const { exclude, ...rest } = req;
    recorder.to.record({ thread: recorder.thread, at: now, req: exclude ? { ...rest, exclude: [...exclude] } : rest, views: [...views], draws, pick });
  }
}
