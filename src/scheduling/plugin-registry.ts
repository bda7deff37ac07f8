/**
 * The one registry of scheduling plugins. Typed as Records over the config's
 * name unions (src/config/plugin-names.ts), so a name config accepts without
 * a plugin here, or a plugin here without a config name, fails to compile.
 */
import type { FilterName, PickerName, ScorerName } from "../config/plugin-names.ts";
import { cacheAffinity } from "./filters/cache-affinity.ts";
import { circuitClosed } from "./filters/circuit-closed.ts";
import { gpuHealthy } from "./filters/gpu-healthy.ts";
import { notDraining } from "./filters/not-draining.ts";
import { ready } from "./filters/ready.ts";
import { servesAdapter } from "./filters/serves-adapter.ts";
import { servesModel } from "./filters/serves-model.ts";
import { maxScore } from "./pickers/max-score.ts";
import { randomPicker } from "./pickers/random.ts";
import { roundRobinPicker } from "./pickers/round-robin.ts";
import { inflight } from "./scorers/inflight.ts";
import { kvCache } from "./scorers/kv-cache.ts";
import { loraAffinity } from "./scorers/lora-affinity.ts";
import { precisePrefix } from "./scorers/precise-prefix.ts";
import { prefixAffinity } from "./scorers/prefix-affinity.ts";
import { prefixRendezvous } from "./scorers/prefix-rendezvous.ts";
import { queueDepth } from "./scorers/queue-depth.ts";
import { tokenLoad } from "./scorers/token-load.ts";
import type { Filter, Picker, Scorer } from "./types.ts";

export const FILTERS: Readonly<Record<FilterName, Filter>> = Object.freeze({
  "serves-model": servesModel,
  "serves-adapter": servesAdapter,
  ready,
  "not-draining": notDraining,
  "circuit-closed": circuitClosed,
  "gpu-healthy": gpuHealthy,
  "cache-affinity": cacheAffinity,
});

export const SCORERS: Readonly<Record<ScorerName, Scorer>> = Object.freeze({
  "queue-depth": queueDepth,
  "kv-cache": kvCache,
  inflight,
  "prefix-affinity": prefixAffinity,
  "prefix-rendezvous": prefixRendezvous,
  "precise-prefix": precisePrefix,
  "lora-affinity": loraAffinity,
  "token-load": tokenLoad,
});

export const PICKERS: Readonly<Record<PickerName, Picker>> = Object.freeze({
  "max-score": maxScore,
  random: randomPicker,
  "round-robin": roundRobinPicker,
});

/** The three registries together, as the profile takes them. */
export interface SchedulingRegistry {
  readonly filters: Readonly<Record<FilterName, Filter>>;
  readonly scorers: Readonly<Record<ScorerName, Scorer>>;
  readonly pickers: Readonly<Record<PickerName, Picker>>;
}

/** The registry production uses (tests may build a profile over another). */
export const SCHEDULING_REGISTRY: SchedulingRegistry = Object.freeze({ filters: FILTERS, scorers: SCORERS, pickers: PICKERS });
