/**
 * Which models the gateway serves: configured models with their aliases and
 * fallbacks, plus models discovered from each endpoint's /v1/models. Resolves
 * a client's model name (or alias) to the canonical name.
 */
import type { Config, Deadlines, ModelConfig } from "../config/types.ts";

export class ModelCatalog {
  private readonly configured = new Map<string, ModelConfig>();
  private readonly aliases = new Map<string, string>();
  /** endpoint row → models it serves (configured list, or what discovery reported). */
  private readonly endpointModels: string[][];
  private readonly discovered: boolean[];
  private readonly defaultDeadlines: Deadlines;

  constructor(config: Config) {
    for (const m of config.models) {
      this.configured.set(m.name, m);
      for (const a of m.aliases) this.aliases.set(a, m.name);
    }
    this.endpointModels = config.endpoints.map((e) => (e.models ? [...e.models] : []));
    this.discovered = config.endpoints.map((e) => e.models === undefined);
    this.defaultDeadlines = config.deadlines;
  }

  /** Record what discovery found; ignored for endpoints whose models are configured. Returns whether it changed. */
  setDiscovered(index: number, models: readonly string[]): boolean {
    if (!this.discovered[index]) return false;
    const current = this.endpointModels[index] ?? [];
    if (current.length === models.length && current.every((m, i) => m === models[i])) return false;
    this.endpointModels[index] = [...models];
    return true;
  }

  modelsOf(index: number): readonly string[] {
    return this.endpointModels[index] ?? [];
  }

  /** The canonical model name for a client's model or alias; undefined when nothing serves it. */
  resolve(name: string): string | undefined {
    const canonical = this.aliases.get(name) ?? name;
    if (this.configured.has(canonical)) return canonical;
    return this.endpointModels.some((ms) => ms.includes(canonical)) ? canonical : undefined;
  }

  deadlinesFor(model: string): Deadlines {
    return this.configured.get(model)?.deadlines ?? this.defaultDeadlines;
  }

  fallbacksOf(model: string): readonly string[] {
    return (this.configured.get(model)?.fallback ?? []).map((f) => this.aliases.get(f) ?? f);
  }

  /** Models (and their aliases) that at least one endpoint serves, for GET /v1/models. */
  listed(): { id: string; root: string }[] {
    const served = new Set(this.endpointModels.flat());
    const out: { id: string; root: string }[] = [];
    for (const name of served) out.push({ id: name, root: name });
    for (const [alias, target] of this.aliases) if (served.has(target)) out.push({ id: alias, root: target });
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }
}
