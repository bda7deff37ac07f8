/** Which inputs a scheduling profile reads, from its plugins' declarations: what startup must wire for it. */

import type { Config } from "../config/types.ts";
import { SCHEDULING_REGISTRY, type SchedulingRegistry } from "./plugin-registry.ts";
import type { SchedulingInput } from "./types.ts";

/**
 * The union of what the configured filters and scorers consume. A scorer
 * weighted 0 still runs (its score is reported) but moves no decision, so
 * its inputs are left out: a profile that keeps `precise-prefix` at 0
 * starts no KV-events worker and asks no engine to tokenize.
 */
export function profileInputs(
  config: Pick<Config["scheduling"], "filters" | "scorers">,
  registry: SchedulingRegistry = SCHEDULING_REGISTRY,
): ReadonlySet<SchedulingInput> {
  const inputs = new Set<SchedulingInput>();
  for (const name of config.filters) for (const i of registry.filters[name].consumes) inputs.add(i);
  for (const { name, weight } of config.scorers) if (weight > 0) for (const i of registry.scorers[name].consumes) inputs.add(i);
  return inputs;
}
