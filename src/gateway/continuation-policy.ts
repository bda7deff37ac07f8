/**
 * Which streams may be continued on another replica, and where:
 * the config's switches — globally, per model, per endpoint — and what the
 * gateway learned at run time: an endpoint that answered a chat continuation
 * with a 400 cannot take a prefill, and is never a target for that model
 * again.
 */
import type { ContinuationConfig } from "../config/types.ts";

/** Learned refusals kept at most (endpoint ids of fleet replicas come and go; the oldest are forgotten first). */
const MAX_LEARNED = 4096;

export class ContinuationPolicy {
  private readonly offModels: ReadonlySet<string>;
  private readonly offEndpoints: ReadonlySet<string>;
  /** `${endpointId}\0${model}` of endpoints that refused a continuation of that model. */
  private readonly refused = new Set<string>();

  constructor(readonly config: ContinuationConfig) {
    this.offModels = new Set(config.offModels);
    this.offEndpoints = new Set(config.offEndpoints);
  }

  get enabled(): boolean {
    return this.config.enabled;
  }

  get maxRecoveries(): number {
    return this.config.maxRecoveries;
  }

  /** Whether streams of `model` may be continued (and `model` may take a continuation). */
  modelOn(model: string): boolean {
    return this.config.enabled && !this.offModels.has(model);
  }

  /** Whether endpoint `id` may take a continuation of `model`. */
  target(id: string, model: string): boolean {
    return !this.offEndpoints.has(id) && !this.refused.has(`${id}\u0000${model}`);
  }

  /** Endpoint `id` rejected a continuation of `model`: never a target for it again. True when this is news. */
  learnRefusal(id: string, model: string): boolean {
    const key = `${id}\u0000${model}`;
    if (this.refused.has(key)) return false;
    if (this.refused.size >= MAX_LEARNED) this.refused.delete(this.refused.values().next().value!);
    this.refused.add(key);
    return true;
  }
}
