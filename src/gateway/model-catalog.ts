/**
 * Which models the gateway serves: configured models with their aliases and
 * fallbacks, plus the models each endpoint serves (its configured list, or
 * what discovery found in its /v1/models). Resolves a client's model name (or
 * alias) to the canonical name, and tells a model nobody serves (a 404) from
 * one that may be served soon (a 503 with Retry-After): an endpoint has not
 * listed its models yet — the gateway just started, or the upstream is
 * unreachable — or the fleet wants replicas of it.
 */
import type { Config, Deadlines, ModelConfig } from "../config/types.ts";
import type { AdapterCatalog } from "./adapter-catalog.ts";

interface EndpointModels {
  models: string[];
  /** Models come from discovery (no configured list). */
  discovered: boolean;
  /** Discovery has listed them at least once (always true for a configured list). */
  listed: boolean;
}

export class ModelCatalog {
  private configured = new Map<string, ModelConfig>();
  private aliases = new Map<string, string>();
  /** endpoint slot → models it serves. */
  private readonly endpoints = new Map<number, EndpointModels>();
  private defaultDeadlines: Deadlines;
  /** Every model some endpoint serves (rebuilt after a change). */
  private served: Set<string> | undefined;
  /** Endpoints whose models come from discovery that have not listed them yet. */
  private unlisted = 0;
  /** Models the fleet wants replicas of (set once the fleet manager exists). */
  private desired: (name: string) => boolean = () => false;

  constructor(
    config: Config,
    /** LoRA adapters: a request may name one as its model (served by the adapter's base). */
    readonly adapters?: AdapterCatalog,
  ) {
    this.defaultDeadlines = config.deadlines;
    this.reconfigure(config);
  }

  /** The configured models, aliases, fallbacks and deadlines of a reloaded config, swapped in one step; what endpoints serve is kept. */
  reconfigure(config: Pick<Config, "models" | "deadlines">): void {
    const configured = new Map<string, ModelConfig>();
    const aliases = new Map<string, string>();
    for (const m of config.models) {
      configured.set(m.name, m);
      for (const a of m.aliases) aliases.set(a, m.name);
    }
    this.configured = configured;
    this.aliases = aliases;
    this.defaultDeadlines = config.deadlines;
  }

  /** An endpoint took slot `index`: its configured models, or undefined to learn them by discovery. */
  addEndpoint(index: number, models: readonly string[] | undefined): void {
    this.removeEndpoint(index);
    this.endpoints.set(index, { models: models ? [...models] : [], discovered: models === undefined, listed: models !== undefined });
    if (models === undefined) this.unlisted++;
    this.served = undefined;
  }

  removeEndpoint(index: number): void {
    const e = this.endpoints.get(index);
    if (e && !e.listed) this.unlisted--;
    this.endpoints.delete(index);
    this.adapters?.removeEndpoint(index);
    this.served = undefined;
  }

  /** The fleet manager's desired models: a model it wants replicas of is expected, not unknown. */
  expectDesired(desired: (name: string) => boolean): void {
    this.desired = desired;
  }

  /** Record what discovery found; ignored for endpoints whose models are configured. Returns whether it changed. */
  setDiscovered(index: number, models: readonly string[]): boolean {
    const e = this.endpoints.get(index);
    if (!e?.discovered) return false;
    if (!e.listed) {
      e.listed = true;
      this.unlisted--;
    }
    if (e.models.length === models.length && e.models.every((m, i) => m === models[i])) return false;
    e.models = [...models];
    this.served = undefined;
    return true;
  }

  modelsOf(index: number): readonly string[] {
    return this.endpoints.get(index)?.models ?? [];
  }

  private servedModels(): Set<string> {
    if (!this.served) {
      this.served = new Set();
      for (const e of this.endpoints.values()) for (const m of e.models) this.served.add(m);
    }
    return this.served;
  }

  /** The canonical model name for a client's model or alias; undefined when nothing serves it. */
  resolve(name: string): string | undefined {
    const canonical = this.aliases.get(name) ?? name;
    if (this.configured.has(canonical)) return canonical;
    if (this.servedModels().has(canonical)) return canonical;
    return this.adapters?.isAdapter(canonical) ? canonical : undefined;
  }

  /**
   * A name resolve() does not know that may still be served soon: some
   * endpoint has not listed its models yet (starting, or its upstream
   * unreachable since the gateway started), or the fleet wants replicas of
   * it. Such a request is answered 503 NO_READY_ENDPOINT, not 404.
   */
  awaited(name: string): boolean {
    return this.unlisted > 0 || this.desired(this.aliases.get(name) ?? name);
  }

  deadlinesFor(model: string): Deadlines {
    return this.configured.get(model)?.deadlines ?? this.defaultDeadlines;
  }

  fallbacksOf(model: string): readonly string[] {
    return (this.configured.get(model)?.fallback ?? []).map((f) => this.aliases.get(f) ?? f);
  }

  /** Models (and their aliases) that at least one endpoint serves, and the LoRA adapters of those (with their base as `parent`), for GET /v1/models. */
  listed(): { id: string; root: string; parent?: string }[] {
    const served = this.servedModels();
    const out: { id: string; root: string; parent?: string }[] = [];
    for (const name of served) out.push({ id: name, root: name });
    for (const [alias, target] of this.aliases) if (served.has(target)) out.push({ id: alias, root: target });
    for (const a of this.adapters?.listed() ?? []) if (served.has(a.parent) && !served.has(a.id)) out.push({ id: a.id, root: a.id, parent: a.parent });
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }
}
